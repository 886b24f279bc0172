export function startKeyServer(opts: {
  getKeys: () => Record<string, string>;
  dir?: string;
  log?: (level: string, msg: string, fields?: Record<string, unknown>) => void;
}): Promise<{ socketPath: string; token: string; close(): void }>;
export function askKeyServer(opts: { socketPath: string; token: string; ids?: string[] | '*'; names?: boolean; timeoutMs?: number }): Promise<{
  protocolVersion: 1;
  values: Record<string, string>;
  errors: Record<string, { code: string }>;
  names?: string[];
}>;
