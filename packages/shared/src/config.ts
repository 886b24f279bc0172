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
  'CHECKPOINT_KEY',
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
    )
    .meta({ accepts: 'comma-separated list' });

// Each setting's description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
/** Settings every service shares. */
export const baseConfig = z.object({
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222').describe('NATS with JetStream (comma-separated URLs for a cluster).'),
  NATS_NKEY_SEED_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "This service's NATS identity: the file of its nkey seed; each service gets only its own. deploy/start.sh: `$AGENTHOST_STATE/nats-auth/<service>.nk`.",
    ),
  NATS_CA_FILE: z
    .string()
    .min(1)
    .optional()
    .describe("The CA that signed NATS's certificate: the connection is TLS, verified against it. deploy/start.sh: `$AGENTHOST_STATE/nats-auth/tls/ca.pem`."),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .default('postgres://agenthost@127.0.0.1:5432/agenthost')
    .describe(
      'Postgres (`postgres://`); each service uses its own schema. deploy/start.sh: the local Postgres of deploy/infra.sh, each service ' +
        'connecting as its own role (see "Database roles" above). Only the five services get a URL: the edge, Caddy, devchain and Prometheus get none.',
    ),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('The pino log level.'),
  NATS_REQUEST_TIMEOUT_MS: int(5000).describe('How long a call to another service waits for its answer; a backend that does not answer in time is a 503.'),
  NATS_STREAM_REPLICAS: z.coerce
    .number()
    .int()
    .min(1)
    .max(5)
    .default(1)
    .describe('Replicas of the JetStream event stream, set by the services that publish events: 1 on one nats-server, 3 on a NATS cluster (the swarm).'),
  HEALTH_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(0)
    .describe(
      'A container health check port on 127.0.0.1: `GET /livez` (and `/health`) answers 200 while the service serves (connected to NATS, ' +
        'started), 503 otherwise; `/readyz` as on the operator port. `0`: off (supervisord watches the process instead).',
    ),
  METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(0)
    .describe(
      'The operator port: `GET /metrics` (Prometheus text), `/livez` (200 while the process serves), `/readyz` (200 when Postgres, NATS and, for ' +
        'the provisioner, Docker answer; the body names the failing check). `0`: off; deploy/start.sh: from `METRICS_PORT_BASE`. Bound to ' +
        "`METRICS_HOST`. Never the public port: the edge proxies only the gateway's API port.",
    ),
  METRICS_HOST: z
    .string()
    .min(1)
    .default('127.0.0.1')
    .describe("Address of the operator port; open it (e.g. `0.0.0.0` on a private interface) only to the scraper's network."),
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .url()
    .optional()
    .describe('OTLP/HTTP base URL of a trace collector: set, every process traces, sending spans to `<url>/v1/traces`; unset, tracing is off.'),
  TRACE_SAMPLE_RATIO: z.coerce
    .number()
    .min(0)
    .max(1)
    .default(0.1)
    .describe(
      "gateway: share of API requests traced. Backends start no trace of their own: they continue the gateway's (parent-based), so a trace is " +
        'whole or absent, and an untraced request makes no span anywhere.',
    ),
  CERTIFICATE_FILES: configList().describe(
    'PEM certificates whose expiry is exported besides `NATS_CA_FILE` (`agenthost_certificate_expiry_timestamp_seconds`, the "certificate expiring" alert).',
  ),
  OTEL_BSP_SCHEDULE_DELAY: int(5000).describe('Milliseconds spans are batched before they are exported.'),
  INSTANCE_NAME: z.string().default('').describe('Replicas with the same name share a queue group; this id tells them apart in logs.'),
  GATEWAY_ASSERTION_PUBLIC_KEYS: configList()
    .refine((keys) => keys.every((k) => Buffer.from(k, 'base64').length === 32), 'must be comma-separated base64 Ed25519 public keys (32 bytes each)')
    .meta({
      description:
        "The gateway's Ed25519 public keys (base64 of the raw 32 bytes; the current one and, during a rotation, the previous one) that verify its " +
        'assertions (nats/assertion.ts). A backend that serves requests acting for users refuses to start without them.',
      shownDefault: 'required by every backend (deploy/start.sh derives it from `gateway-assertion.pem`)',
    }),
  ASSERTIONS: z
    .enum(['on', 'off'])
    .default('on')
    .describe('`off` only for the gateway benchmark (assertions on against off in one run): no assertion is signed or checked.'),
});

export type BaseConfig = z.output<typeof baseConfig>;

export const configInt = int;
export const configBool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes')
    .meta({ accepts: '`true` or `false` (also `1`/`0`, `yes`/`no`)' });
