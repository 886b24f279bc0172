import { z } from 'zod';

// Config is parsed once at start, every problem is printed together, and the result is frozen.

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export function parseConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined> = process.env): Readonly<z.output<S>> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new ConfigError(problems);
  }
  return Object.freeze(result.data) as Readonly<z.output<S>>;
}

/** For a service's main: parse or print every problem and exit with status 2. */
export function loadConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined> = process.env): Readonly<z.output<S>> {
  try {
    return parseConfig(schema, env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

const int = (def: number) => z.coerce.number().int().default(def);

/** Settings every service shares. */
export const baseConfig = z.object({
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  /** This service's NATS identity (an nkey seed file) and the CA of the server's TLS certificate. */
  NATS_NKEY_SEED_FILE: z.string().min(1).optional(),
  NATS_CA_FILE: z.string().min(1).optional(),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').default('postgres://agenthost@127.0.0.1:5432/agenthost'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  NATS_REQUEST_TIMEOUT_MS: int(5000),
  /** Replicas with the same name share a queue group; an id tells them apart in logs. */
  INSTANCE_NAME: z.string().default(''),
});

export type BaseConfig = z.output<typeof baseConfig>;

export const configInt = int;
export const configBool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
