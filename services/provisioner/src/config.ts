import { z } from 'zod';
import { baseConfig, configInt, contracts, tiersConfig } from '@agenthost/shared';

/** A variable holding JSON that `schema` checks; `what` names the expected shape in the error. */
const jsonVar = <T extends z.ZodType>(name: string, what: string, schema: T) =>
  z.string().transform((v, ctx): z.output<T> => {
    try {
      return schema.parse(JSON.parse(v));
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `${name} must be ${what}: ${(err as Error).message}` });
      return z.NEVER;
    }
  });

const jsonRecord = (name: string, value: z.ZodType<string>) => jsonVar(name, 'a JSON object of strings', z.record(z.string().min(1), value));

/** An image repository such as agenthost/openclaw or registry:5000/team/agent (no tag, no digest). */
/** Seconds per tier (idle sleep): 0 or a tier left out means never. */
const tierSeconds = (name: string) =>
  jsonVar(name, 'a JSON object mapping tiers to whole seconds', z.partialRecord(contracts.tierName, z.number().int().min(0)));
const imageRepo = z.string().regex(/^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*$/, 'must be an image repository without tag');

// Each setting's description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
export const provisionerConfig = baseConfig
  .extend({
    PROVISIONER_DRIVER: z
      .enum(['docker', 'swarm'])
      .default('docker')
      .describe(
        'Where instances run. `docker`: containers on one engine (`DOCKER_HOST`). `swarm`: one swarm service per instance across the nodes ' +
          'of a swarm, `DOCKER_HOST` being a manager (set by deploy/swarm).',
      ),
    // Agents are idle most of the time: 0.25 lets a node hold four times the instances its cores would if every agent
    // were busy at once, and never more memory than it has.
    SWARM_CPU_RESERVATION: z.coerce
      .number()
      .min(0.01)
      .max(1)
      .default(0.25)
      .describe("swarm: the share of an instance's CPU limit that is reserved on its node (its memory is reserved whole)."),
    SWARM_JANITOR_IMAGE: z
      .string()
      .default('')
      .describe(
        "swarm: the image of the one-shot jobs on a node (the provisioner's own, with iptables): preparing it (the instance bridge and its " +
          "firewall), removing a deleted instance's volume, copying a moved one's. Set by deploy/swarm.",
      ),
    SWARM_MOVE_TIMEOUT_SECONDS: configInt(600).describe(
      "swarm: how long copying one instance's volume off a draining node may take before the move is given up (and tried again).",
    ),
    DOCKER_HOST: z
      .string()
      .default('')
      .meta({ description: 'The Docker Engine API (`unix:///var/run/docker.sock`, `tcp://host:2375`).', shownDefault: 'empty: the local socket' }),
    DOCKER_TIMEOUT_MS: configInt(20_000).describe(
      'Timeout of one Docker Engine API call (503 when exceeded). Generous: a loaded engine can take seconds to start containers; a hung ' +
        'one is detected by the ping within about 4 s.',
    ),
    PORT_RANGE_START: configInt(18000).describe('First port of the instance ports (1024 ≤ `PORT_RANGE_START` ≤ `PORT_RANGE_END` ≤ 65535).'),
    PORT_RANGE_END: configInt(19000).describe('Last port of the instance ports.'),
    PUBLISH_HOST: z.string().default('127.0.0.1').describe('The host address instance ports are published on.'),
    INSTANCE_URL_TEMPLATE: z
      .string()
      .default('https://{id}.agenthost.localhost')
      .describe(
        'Public URL of an instance; `{port}`, `{id}` and `{host}` (the address of its node; localhost on one engine) are replaced, and it ' +
          'must contain `{port}` or `{id}`. deploy/start.sh: its https address through the edge, from `EDGE_DOMAIN` and `EDGE_HTTPS_PORT`.',
      ),
    FRAMEWORK_IMAGES: jsonRecord('FRAMEWORK_IMAGES', imageRepo).default({ openclaw: 'agenthost/openclaw' }).meta({
      accepts: 'JSON',
      description: "Framework → image repository (such as `registry:5000/team/agent`: no tag, no digest); the image tag is the instance's version.",
    }),
    DEFAULT_VERSION: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/)
      .default('latest')
      .describe('The version (image tag) of an instance created without one.'),
    READY_TIMEOUT_SECONDS: configInt(180).describe('An instance not ready by then turns `failed`.'),
    STARTS_AT_ONCE: configInt(3).describe(
      'Staggered starts: at most this many agents of a provisioner replica start at once (started, not yet ready); a create, start, restart, ' +
        'wake or crash restart waits for a slot up to `START_QUEUE_MAX_SECONDS`, then goes ahead. `0`: no limit.',
    ),
    START_QUEUE_MAX_SECONDS: configInt(10).describe('The longest a start waits for a slot (`STARTS_AT_ONCE`) before it goes ahead.'),
    ESTIMATED_READY_SECONDS: configInt(20).describe('Shown as `estimated_ready` until real readiness times have been measured.'),
    INSTANCE_NETWORK: z
      .string()
      .regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/)
      .default('agenthost-instances')
      .describe('The bridge network of the instances (created when missing, inter-container traffic disabled).'),
    INSTANCE_SCOPE: z.string().default('').meta({
      description: 'Label value that marks the containers and volumes of this deployment; the reconciler never touches others.',
      shownDefault: 'empty: `INSTANCE_NETWORK`',
    }),
    GATEWAY_PORT: configInt(8080).describe('Port of the gateway on the host, reachable from instances through the bridge gateway address.'),
    INSTANCE_GATEWAY_URL: z
      .string()
      .default('')
      .meta({
        description:
          "Base URL (with `/api`) under which instances reach the gateway and fetch their keys; `{host}` is replaced by the address of the instance's " +
          "node (swarm: every node's edge serves the API).",
        shownDefault: 'empty: `http://<bridge gateway IP>:<GATEWAY_PORT>/api`',
      }),
    FIREWALL: z
      .enum(['enforce', 'off'])
      .default('enforce')
      .describe(
        '`enforce`: install the host firewall rules of the instance network (needs root and iptables) or refuse to start: instances reach only the ' +
          "gateway port on the host (swarm: on every node, only the edge's instance port of `INSTANCE_GATEWAY_URL`, installed by the job that " +
          'prepares the node). `off`: skip.',
      ),
    RECONCILE_INTERVAL_SECONDS: configInt(30).describe('How often Docker and the database are reconciled.'),
    STATS_INTERVAL_SECONDS: configInt(5).describe('Docker stats sampling period of running instances (CPU % needs two samples).'),
    STORAGE_SAMPLE_INTERVAL_SECONDS: configInt(60).describe('Volume sizes (`storage_used_mb`) are measured this often.'),
    VOLUME_QUOTA: z
      .enum(['enforce', 'off'])
      .default('enforce')
      .describe(
        "`enforce`: every instance volume is an ext4 loop file of the tier's `storage_mb` (a hard cap, ENOSPC at the limit), and instances over " +
          'quota are stopped; needs root, `/dev/loop-control`, `losetup` and `mkfs.ext4`, or the provisioner refuses to start. `off`: plain ' +
          'Docker volumes, storage checked at create only.',
      ),
    VOLUME_DIR: z
      .string()
      .default('')
      .meta({
        description:
          'Where the volume files live (`<dir>/<scope>/<id>.ext4`, mounted under `<dir>/<scope>/mnt`); mount a separate filesystem here to keep ' +
          'agents off the Postgres/NATS disk.',
        shownDefault: 'empty: `$AGENTHOST_STATE/volumes`',
      }),
    VOLUME_UNLIMITED_MB: configInt(102_400).describe('Size of a volume of a tier with unlimited storage (sparse: only written blocks use disk).'),
    QUOTA_CHECK_INTERVAL_SECONDS: configInt(5).describe('Size-limited volumes are measured (`statfs`) and the quota enforced this often.'),
    QUOTA_GRACE_SECONDS: configInt(300).describe(
      'An instance started less than this long ago is not stopped for storage, so its owner can start it and delete files.',
    ),
    RESTART_BACKOFF_INITIAL_MS: configInt(1000).describe(
      'A crashed agent is started again after this delay, doubled for each crash in a row up to `RESTART_BACKOFF_MAX_SECONDS`, forever (docker driver).',
    ),
    RESTART_BACKOFF_MAX_SECONDS: configInt(300).describe('The longest delay before a crashed agent is started again.'),
    RESTART_STABLE_SECONDS: configInt(300).describe(
      'A crash counts as "in a row" when the agent ran less than this; one that ran longer starts a new series (the delay is the initial one again).',
    ),
    RESTART_FAILED_AFTER: configInt(5).describe(
      'This many crashes in a row turn the instance `failed` (it is still restarted, and turns `running` again once it is ready).',
    ),
    BOOT_RETRIES: configInt(2).describe(
      'An agent that exits before it is first ready is booted again up to this many times (after `RESTART_BACKOFF_INITIAL_MS`, doubled) before the instance turns `failed`; 0: it fails at the first exit (docker driver).',
    ),
    STOP_TIMEOUT_SECONDS: configInt(5).describe('A stopping agent gets SIGTERM, then SIGKILL after this long.'),
    TMPFS_SIZE_MB: configInt(64).describe("Size of an instance's `/tmp` (a tmpfs)."),
    INSTANCE_EXTRA_ENV_JSON: jsonRecord('INSTANCE_EXTRA_ENV_JSON', z.string())
      .default({})
      .meta({ accepts: 'JSON', description: 'Extra environment for every instance container (a JSON object of strings), e.g. agent tuning. Never secrets.' }),
    KEYS_HOT_RELOAD: z
      .enum(['on', 'off'])
      .default('on')
      .describe(
        '`on`: instances keep a key watch open and reload changed keys without a restart (agents whose image says how, `AGENTHOST_RELOAD_URL`; ' +
          'others load keys at start only). `off`: keys reach an agent at its next start, in its environment.',
      ),
    TIER_LIMITS_JSON: tiersConfig,
    BACKUP_KEY: z
      .string()
      .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be base64 of 32 bytes')
      .optional()
      .describe(
        'The backup master key (base64 of 32 bytes): each archive is encrypted under a key derived from it for its owner, instance and backup; ' +
          'losing it loses every backup. Unset: backups answer 501 `BACKUPS_UNSUPPORTED`. deploy/start.sh makes `$AGENTHOST_STATE/secrets/backup-key` ' +
          '(root only) and gives the provisioner alone its path, as `BACKUP_KEY_FILE`.',
      ),
    BACKUP_DIR: z.string().default('').meta({
      description: 'Where backup archives are kept (`<dir>/<scope>/<backup_id>.bak`, mode 0600); put a separate filesystem here.',
      shownDefault: 'empty: `$AGENTHOST_STATE/backups`',
    }),
    BACKUP_S3_BUCKET: z
      .string()
      .min(3)
      .optional()
      .describe(
        'Set: backup archives are kept in this S3-compatible bucket (objects `<scope>/<backup_id>.bak`, still AES-256-GCM encrypted) instead of `BACKUP_DIR`.',
      ),
    BACKUP_S3_ENDPOINT: z
      .string()
      .url()
      .refine((v) => /^https?:\/\//.test(v), 'must be an http(s):// URL')
      .optional()
      .describe("The S3-compatible server's URL (MinIO, Ceph, Garage...; path-style addressing); unset: AWS S3 of `BACKUP_S3_REGION`."),
    BACKUP_S3_REGION: z.string().default('us-east-1').describe("The bucket's region."),
    BACKUP_S3_ACCESS_KEY_ID: z
      .string()
      .optional()
      .describe(
        "The bucket's access key, set together with `BACKUP_S3_SECRET_ACCESS_KEY` or not at all. Both unset: the AWS SDK's own chain " +
          '(`AWS_SHARED_CREDENTIALS_FILE`, an instance role).',
      ),
    BACKUP_S3_SECRET_ACCESS_KEY: z.string().optional().describe("The bucket's secret key, best from a file (`BACKUP_S3_SECRET_ACCESS_KEY_FILE`)."),
    BACKUP_SCHEDULE_SECONDS: configInt(86_400).describe(
      'Scheduled backups: an instance (running or stopped) of a tier with `backups_kept` > 0 gets one when its last scheduled backup is this old (daily).',
    ),
    SLEEP_AFTER_IDLE_SECONDS_JSON: tierSeconds('SLEEP_AFTER_IDLE_SECONDS_JSON')
      .default({ free: 300, pro: 0, enterprise: 0 })
      .meta({
        accepts: 'JSON',
        description:
          'The light sleep per tier: an instance with no traffic through the edge for this many seconds is frozen (status `sleeping`, ' +
          "`sleep_depth` `swapped` or `frozen`) and, where the host's swap keeps memory off plain disk (`SLEEP_SWAP`), its memory goes out to " +
          'swap but `SLEEP_RESIDENT_MB`; the next request to its URL resumes the same agent in about a second. `0`, or a tier left out: never ' +
          '([decision 0052](decisions/0052-two-sleep-depths.md)).',
      }),
    DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON: tierSeconds('DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON')
      .default({ free: 1800, pro: 0, enterprise: 0 })
      .meta({
        accepts: 'JSON',
        description:
          "The deep sleep per tier: after this many seconds without traffic (from running or from a light sleep) the agent's processes are " +
          'checkpointed to an encrypted image (`sleep_depth` `checkpointed`, `SLEEP_CHECKPOINT`) and restored by the next request in seconds, ' +
          'or, where checkpointing is off, the container is stopped (`stopped`) and the next request boots the agent. Volume, keys, port and ' +
          'URL are kept either way. `0`, or a tier left out: never. On the swarm driver there is one depth: the first of the two times stops the container.',
      }),
    WARM_POOL_JSON: jsonVar(
      'WARM_POOL_JSON',
      'a JSON object mapping frameworks to {tier: count}',
      z.record(z.string().min(1), z.partialRecord(contracts.tierName, z.number().int().min(0).max(20))),
    )
      .default({})
      .meta({
        accepts: 'JSON',
        description:
          'The warm pool: per framework and tier, how many agents of `DEFAULT_VERSION` are kept booted and checkpointed, ownerless, for a create to claim ' +
          '(it then runs in about the time of a wake, not a boot), e.g. `{"openclaw":{"free":2,"pro":1}}`. Each holds a port, a volume and a sealed image. ' +
          'Needs the checkpointed sleep and key hot reload; docker driver only (docs/decisions/0063-a-warm-pool-of-checkpointed-agents.md).',
      }),
    BOOT_CPUS: z.coerce
      .number()
      .min(0)
      .default(2)
      .describe(
        "Boot on a burst: an agent's container starts with this many CPUs (at most the host's) when its tier has fewer, and is set to its " +
          "tier's share once it answers `/readyz`, before it counts as running. `0`: off. Docker driver only.",
      ),
    SLEEP_RESIDENT_MB: configInt(64).describe('A lightly sleeping agent keeps this much of its memory resident; the rest goes out to swap.'),
    SLEEP_SWAP: z
      .enum(['auto', 'off'])
      .default('auto')
      .describe(
        "`auto`: push a sleeping agent's memory out when every swap of the host keeps it off plain disk (zram, dm-crypt; docker/swap.ts); " +
          "`off`: only freeze. The provisioner's log says what it found at start.",
      ),
    SLEEP_CHECKPOINT: z
      .enum(['auto', 'off'])
      .default('auto')
      .describe(
        "`auto`: the deep sleep checkpoints an agent's processes with CRIU (deploy/criu/build.sh) when this host can: a `CHECKPOINT_KEY`, " +
          'the engine on this host, the provisioner as root, and `criu check` passing; instances created from then on can be checkpointed. ' +
          '`off`: the deep sleep stops the container. Docker driver only; the log says at start which it is ' +
          '([decision 0049](decisions/0049-wake-restores-a-checkpoint-through-runc-and-criu.md)).',
      ),
    CHECKPOINT_KEY: z
      .string()
      .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be base64 of 32 bytes')
      .optional()
      .describe(
        "The checkpoint master key (base64 of 32 bytes): a sleeping agent's image is sealed (AES-256-GCM) under a key derived from it for its " +
          'instance. Losing it only makes the next wake of a checkpointed agent a boot. deploy/start.sh makes `$AGENTHOST_STATE/secrets/checkpoint-key` ' +
          '(root only) and gives the provisioner alone its path, as `CHECKPOINT_KEY_FILE`.',
      ),
    CHECKPOINT_DIR: z.string().default('').meta({
      description: 'Where sealed checkpoint images are kept, one directory per sleeping instance (root only; about 140 MB for an idle OpenClaw).',
      shownDefault: 'empty: `$AGENTHOST_STATE/checkpoints`',
    }),
    CRIU_RUNTIME_DIR: z
      .string()
      .default('/usr/local/lib/agenthost-criu')
      .describe('The CRIU runtime deploy/criu/build.sh assembles (criu, hold-init, the sealer).'),
    SLEEP_CHECK_INTERVAL_SECONDS: configInt(15).describe('How often idle instances are looked for.'),
    FAULT_PAUSE_AT: z.string().default('').describe('Test-only fault injection: comma-separated step names where an operation pauses (domain/faults.ts).'),
  })
  .superRefine((c, ctx) => {
    if (Boolean(c.BACKUP_S3_ACCESS_KEY_ID) !== Boolean(c.BACKUP_S3_SECRET_ACCESS_KEY)) {
      ctx.addIssue({
        code: 'custom',
        path: ['BACKUP_S3_ACCESS_KEY_ID'],
        message: 'set BACKUP_S3_ACCESS_KEY_ID and BACKUP_S3_SECRET_ACCESS_KEY(_FILE) together, or neither',
      });
    }
    if (c.PORT_RANGE_START < 1024 || c.PORT_RANGE_END > 65535 || c.PORT_RANGE_START > c.PORT_RANGE_END) {
      ctx.addIssue({ code: 'custom', path: ['PORT_RANGE_START'], message: 'port range must satisfy 1024 <= PORT_RANGE_START <= PORT_RANGE_END <= 65535' });
    }
    if (!c.INSTANCE_URL_TEMPLATE.includes('{port}') && !c.INSTANCE_URL_TEMPLATE.includes('{id}')) {
      ctx.addIssue({ code: 'custom', path: ['INSTANCE_URL_TEMPLATE'], message: 'must contain {port} or {id}' });
    }
  });

export type ProvisionerConfig = z.output<typeof provisionerConfig>;
