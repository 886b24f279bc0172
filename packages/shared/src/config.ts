import { readFileSync } from 'node:fs';
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

/**
 * Secrets that may come from a file instead of the environment: <NAME>_FILE names the file (Docker and
 * swarm secrets are mounted as files under /run/secrets). So the value is not in the process environment,
 * where child processes and /proc/<pid>/environ would see it.
 */
export const FILE_SECRETS = [
  'DATABASE_URL',
  'MASTER_KEY_ENCRYPTION',
  'MASTER_KEYS_PREVIOUS',
  'GATEWAY_ASSERTION_PRIVATE_KEY',
  'KEYVAULT_SEAL_PRIVATE_KEY',
  'BACKUP_KEY',
  'BACKUP_S3_SECRET_ACCESS_KEY',
  'BILLING_DATA_KEY',
] as const;

function withFileSecrets(env: Record<string, string | undefined>): { env: Record<string, string | undefined>; problems: string[] } {
  const out = { ...env };
  const problems: string[] = [];
  for (const name of FILE_SECRETS) {
    const file = env[`${name}_FILE`];
    if (!file) continue;
    if (env[name] !== undefined) problems.push(`${name}: set both ${name} and ${name}_FILE; keep one`);
    try {
      out[name] = readFileSync(file, 'utf8').trim();
    } catch (err) {
      problems.push(`${name}_FILE: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  return { env: out, problems };
}

export function parseConfig<S extends z.ZodType>(schema: S, rawEnv: Record<string, string | undefined> = process.env): Readonly<z.output<S>> {
  const { env, problems: fileProblems } = withFileSecrets(rawEnv);
  if (fileProblems.length) throw new ConfigError(fileProblems);
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
/** A comma-separated list in one variable (empty entries dropped); unset is an empty list. */
export const configList = () =>
  z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );

export const baseConfig = z.object({
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  /** This service's NATS identity (an nkey seed file) and the CA of the server's TLS certificate. */
  NATS_NKEY_SEED_FILE: z.string().min(1).optional(),
  NATS_CA_FILE: z.string().min(1).optional(),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .default('postgres://agenthost@127.0.0.1:5432/agenthost'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  NATS_REQUEST_TIMEOUT_MS: int(5000),
  /** Replicas of the JetStream event stream: 1 on one nats-server, 3 on a NATS cluster (the swarm deployment). */
  NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /**
   * A container health check port: GET http://127.0.0.1:<port>/health answers 200 while the service serves
   * (connected to NATS, started), 503 otherwise. 0: off (supervisord watches the process instead).
   */
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  /**
   * The operator port: GET /metrics (Prometheus), /livez and /readyz (observe/operator.ts). 0: off. Bound to
   * METRICS_HOST, loopback by default: the public edge never serves it; open it to the scraper's network only.
   */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** Traces go to <endpoint>/v1/traces over OTLP/HTTP when set; unset, tracing is off (observe/tracing.ts). */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  /** Share of new traces kept (a request with a sampled parent is always kept). */
  TRACE_SAMPLE_RATIO: z.coerce.number().min(0).max(1).default(0.1),
  /** Certificate files (PEM, comma-separated) whose expiry is exported, besides NATS_CA_FILE (the "certificate expiring" alert). */
  CERTIFICATE_FILES: configList(),
  /** Milliseconds spans are batched before they are exported. */
  OTEL_BSP_SCHEDULE_DELAY: int(5000),
  /** Replicas with the same name share a queue group; an id tells them apart in logs. */
  INSTANCE_NAME: z.string().default(''),
  /**
   * The gateway's Ed25519 public keys (base64 of the raw 32 bytes, comma-separated: the current one and, during
   * a rotation, the previous one) that verify its assertions (nats/assertion.ts). A backend that serves
   * requests acting for users refuses to start without them.
   */
  GATEWAY_ASSERTION_PUBLIC_KEYS: configList().refine(
    (keys) => keys.every((k) => Buffer.from(k, 'base64').length === 32),
    'must be comma-separated base64 Ed25519 public keys (32 bytes each)',
  ),
  /** For the gateway benchmark only (assertions on against off in one run): 'off' signs and checks none. */
  ASSERTIONS: z.enum(['on', 'off']).default('on'),
});

export type BaseConfig = z.output<typeof baseConfig>;

export const configInt = int;
export const configBool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
