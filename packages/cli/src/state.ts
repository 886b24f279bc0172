import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Where the CLI keeps its wallet (like solana-keygen's id.json) and its session token, readable by the user only. */
const stateDir = () => process.env.AGENTHOST_HOME ?? path.join(os.homedir(), '.agenthost');

export function readJson<T>(name: string): T | undefined {
  const file = path.join(stateDir(), name);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : undefined;
}

export function writeJson(name: string, value: unknown): string {
  mkdirSync(stateDir(), { recursive: true, mode: 0o700 });
  const file = path.join(stateDir(), name);
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return file;
}
