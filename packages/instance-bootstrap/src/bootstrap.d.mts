export {
  AAD_VERSION,
  aadFor,
  decodeInstanceKey,
  IV_BYTES,
  KEY_BYTES,
  KEY_NAME_RE,
  KeyOpenError,
  openKey,
  parseSealed,
  TAG_BYTES,
} from './crypto.mjs';
export type { SealedKey } from './crypto.mjs';

export type Logger = (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;

export declare const STRIPPED_ENV: readonly ['AGENTHOST_INSTANCE_SECRET', 'AGENTHOST_INSTANCE_KEY'];
export declare const RESERVED_PREFIX: 'AGENTHOST_';
export declare const DEFAULT_TIMEOUT_MS: 60000;

export declare class FatalError extends Error {
  constructor(message: string, fields?: Record<string, unknown>);
  fields: Record<string, unknown>;
}

export declare function makeLogger(instanceId: string | undefined, write?: (line: string) => void): Logger;

export declare function fetchKeys(args: {
  url: string;
  instanceId: string;
  instanceSecret: string;
  timeoutMs?: number;
  log?: Logger;
  fetchImpl?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}): Promise<Record<string, unknown>>;

export declare function decryptKeys(args: { keys: Record<string, unknown>; instanceId: string; instanceKey: string | Uint8Array; log?: Logger }): {
  env: Record<string, string>;
  loaded: string[];
  skipped: { name: string; reason: string }[];
};

export declare function buildAgentEnv(baseEnv: Record<string, string | undefined>, decrypted: Record<string, string>): Record<string, string>;

export declare function resolveCommand(command: string, searchPath?: string): string | null;

export declare function main(argv?: string[], env?: Record<string, string | undefined>): Promise<void>;

/** Reads the credentials line the provisioner writes on stdin (fd), or throws FatalError after timeoutMs. */
export declare function readCredentials(fd: number, timeoutMs: number): Promise<{ secret: string | undefined; key: string | undefined }>;
