export const SECRET_PROVIDER: 'agenthost';
export const PROVIDER_KEYS: Readonly<Record<string, string[]>>;
export function keyRef(name: string): { source: 'exec'; provider: 'agenthost'; id: string };
export function wireProviderKeys(config: unknown, names: Iterable<string>): { config: Record<string, unknown>; wired: string[]; userSet: string[] };
export function openclawConfigPath(env: Record<string, string | undefined>): string;
export function applyProviderKeys(opts: {
  configPath: string;
  names: Iterable<string>;
  log?: (level: string, msg: string, fields?: Record<string, unknown>) => void;
}): { changed: boolean; wired: string[]; userSet: string[] };
