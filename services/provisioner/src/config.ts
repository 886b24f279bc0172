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

export const provisionerConfig = baseConfig
  .extend({
    /**
     * Where instances run. docker: containers on one engine (DOCKER_HOST). swarm: one swarm service per
     * instance across the nodes of a swarm, DOCKER_HOST being a manager (deploy/swarm).
     */
    PROVISIONER_DRIVER: z.enum(['docker', 'swarm']).default('docker'),
    /**
     * swarm: the share of an instance's CPU limit that is reserved on its node (memory is reserved whole).
     * Agents are idle most of the time: 0.25 lets a node hold four times the instances its cores would
     * if every agent were busy at once, and never more memory than it has.
     */
    SWARM_CPU_RESERVATION: z.coerce.number().min(0.01).max(1).default(0.25),
    /** swarm: the image of the one-shot job that removes an instance's volume on its node (the provisioner's own). */
    SWARM_JANITOR_IMAGE: z.string().default(''),
    /** swarm: how long moving one instance's volume off a draining node may take before it is given up (and tried again). */
    SWARM_MOVE_TIMEOUT_SECONDS: configInt(600),
    /** Docker endpoint (unix:///var/run/docker.sock, tcp://host:2375). Empty: dockerode's default (DOCKER_HOST env or the local socket). */
    DOCKER_HOST: z.string().default(''),
    /** Timeout of one Docker Engine API call (503 when exceeded). Generous: a loaded engine can take seconds to start containers; a hung one is detected by the ping within ~4 s. */
    DOCKER_TIMEOUT_MS: configInt(20_000),
    PORT_RANGE_START: configInt(18000),
    PORT_RANGE_END: configInt(19000),
    /** Host address the instance port is published on. */
    PUBLISH_HOST: z.string().default('127.0.0.1'),
    /**
     * Public URL of an instance; {port}, {id} and {host} (the address of its node; localhost on one engine) are
     * replaced. Its https address through the edge (deploy/start.sh sets the edge's domain and port here).
     */
    INSTANCE_URL_TEMPLATE: z.string().default('https://{id}.agenthost.localhost'),
    /** framework → image repository; the image tag is the instance's version. */
    FRAMEWORK_IMAGES: jsonRecord('FRAMEWORK_IMAGES', imageRepo).default({ openclaw: 'agenthost/openclaw' }),
    DEFAULT_VERSION: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/)
      .default('latest'),
    READY_TIMEOUT_SECONDS: configInt(180),
    /**
     * Staggered starts: at most this many agents of a provisioner replica start at once (started, not yet ready); a
     * start waits for a slot up to START_QUEUE_MAX_SECONDS, then goes ahead. 0: no limit.
     */
    STARTS_AT_ONCE: configInt(3),
    START_QUEUE_MAX_SECONDS: configInt(10),
    /** Shown as estimated_ready until real readiness times have been measured. */
    ESTIMATED_READY_SECONDS: configInt(20),
    /** The bridge network of the instances (created when missing, inter-container traffic disabled). */
    INSTANCE_NETWORK: z
      .string()
      .regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/)
      .default('agenthost-instances'),
    /** Label value that marks the containers/volumes of this deployment; the reconciler never touches others. Default: INSTANCE_NETWORK. */
    INSTANCE_SCOPE: z.string().default(''),
    /** Port of the gateway on the host, reachable from instances through the bridge gateway address. */
    GATEWAY_PORT: configInt(8080),
    /**
     * Base URL (with /api) under which instances reach the gateway. Default: http://<bridge gateway IP>:<GATEWAY_PORT>/api.
     * {host} is replaced by the address of the instance's node (swarm: every node's edge serves the API).
     */
    INSTANCE_GATEWAY_URL: z.string().default(''),
    /** enforce: install the host firewall rules of the instance network (needs root + iptables) or refuse to start. off: skip. */
    FIREWALL: z.enum(['enforce', 'off']).default('enforce'),
    RECONCILE_INTERVAL_SECONDS: configInt(30),
    /** Docker stats sampling period of running instances (CPU % needs two samples). */
    STATS_INTERVAL_SECONDS: configInt(5),
    /** Volume sizes (storage_used_mb) are measured this often. */
    STORAGE_SAMPLE_INTERVAL_SECONDS: configInt(60),
    /**
     * enforce: every instance volume is an ext4 loop file of the tier's storage_mb (hard cap, ENOSPC at the
     * limit) and over-quota instances are stopped; needs root, loop devices and mkfs.ext4, or the provisioner
     * refuses to start. off: plain Docker volumes, storage checked at create only.
     */
    VOLUME_QUOTA: z.enum(['enforce', 'off']).default('enforce'),
    /** Where the volume files live (put a separate filesystem here). Default: $AGENTHOST_STATE/volumes (/var/lib/agenthost/volumes). */
    VOLUME_DIR: z.string().default(''),
    /** Size of a volume of a tier with unlimited storage (sparse: only written blocks use disk). */
    VOLUME_UNLIMITED_MB: configInt(102_400),
    /** Size-limited volumes are measured (statfs) and the quota enforced this often. */
    QUOTA_CHECK_INTERVAL_SECONDS: configInt(5),
    /** An instance started less than this long ago is not stopped for storage, so its owner can start it and delete files. */
    QUOTA_GRACE_SECONDS: configInt(300),
    /**
     * Self-healing (docker driver): a crashed agent is started again after RESTART_BACKOFF_INITIAL_MS, doubling with
     * each crash in a row up to RESTART_BACKOFF_MAX_SECONDS, forever. A crash counts as "in a row" when the agent
     * ran less than RESTART_STABLE_SECONDS; the RESTART_FAILED_AFTER-th in a row turns the instance failed (it is
     * still restarted, and turns running again once it is ready).
     */
    RESTART_BACKOFF_INITIAL_MS: configInt(1000),
    RESTART_BACKOFF_MAX_SECONDS: configInt(300),
    RESTART_STABLE_SECONDS: configInt(300),
    RESTART_FAILED_AFTER: configInt(5),
    STOP_TIMEOUT_SECONDS: configInt(5),
    TMPFS_SIZE_MB: configInt(64),
    /** Extra environment for every instance container (JSON object), e.g. agent tuning. Never secrets. */
    INSTANCE_EXTRA_ENV_JSON: jsonRecord('INSTANCE_EXTRA_ENV_JSON', z.string()).default({}),
    /**
     * on: instances keep a key watch open and reload changed keys without a restart (agents whose image says how,
     * AGENTHOST_RELOAD_URL; others load keys at start only). off: keys reach an agent at its next start.
     */
    KEYS_HOT_RELOAD: z.enum(['on', 'off']).default('on'),
    TIER_LIMITS_JSON: tiersConfig,
    /**
     * The backup master key (base64 of 32 bytes; deploy makes $AGENTHOST_STATE/secrets/backup-key and gives it to
     * the provisioner alone, as BACKUP_KEY_FILE). Each archive is encrypted under a key derived from it for its
     * owner, instance and backup. Unset: backups are refused (501 BACKUPS_UNSUPPORTED).
     */
    BACKUP_KEY: z
      .string()
      .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be base64 of 32 bytes')
      .optional(),
    /** Where backup archives are kept (put a separate filesystem here). Default: $AGENTHOST_STATE/backups. */
    BACKUP_DIR: z.string().default(''),
    /** Set: archives are kept in this S3-compatible bucket (objects <scope>/<id>.bak) instead of BACKUP_DIR. */
    BACKUP_S3_BUCKET: z.string().min(3).optional(),
    /** The S3-compatible server (MinIO, Ceph, Garage...), path-style; unset: AWS S3 of BACKUP_S3_REGION. */
    BACKUP_S3_ENDPOINT: z
      .string()
      .url()
      .refine((v) => /^https?:\/\//.test(v), 'must be an http(s):// URL')
      .optional(),
    BACKUP_S3_REGION: z.string().default('us-east-1'),
    /**
     * The bucket's access key; its secret comes from BACKUP_S3_SECRET_ACCESS_KEY_FILE (or the variable). Both unset:
     * the AWS SDK's own chain (AWS_SHARED_CREDENTIALS_FILE, an instance role).
     */
    BACKUP_S3_ACCESS_KEY_ID: z.string().optional(),
    BACKUP_S3_SECRET_ACCESS_KEY: z.string().optional(),
    /** Scheduled backups: each instance of a tier that keeps backups gets one when its last scheduled one is this old (daily). */
    BACKUP_SCHEDULE_SECONDS: configInt(86_400),
    /**
     * Idle sleep, per tier, in two depths (docs/decisions/0052-two-sleep-depths.md). An instance with no traffic
     * through the edge for SLEEP_AFTER_IDLE_SECONDS_JSON seconds falls asleep lightly: its processes are frozen and,
     * where the host's swap keeps memory off plain disk (zram or dm-crypt; SLEEP_SWAP), its memory goes out to swap
     * but SLEEP_RESIDENT_MB. After DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON seconds without traffic its container is stopped.
     * Either way volume, keys, port and URL are kept and the next request to its URL wakes it. 0: never. On the swarm
     * driver there is one depth: the container is stopped at the first of the two times.
     */
    SLEEP_AFTER_IDLE_SECONDS_JSON: tierSeconds('SLEEP_AFTER_IDLE_SECONDS_JSON').default({ free: 300, pro: 0, enterprise: 0 }),
    DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON: tierSeconds('DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON').default({ free: 1800, pro: 0, enterprise: 0 }),
    /**
     * Boot on a burst: an agent's container starts with this many CPUs (at most the host's) when its tier has fewer,
     * and is set to its tier's share once it answers /readyz, before it counts as running. 0: off. Docker driver only.
     */
    BOOT_CPUS: z.coerce.number().min(0).default(2),
    /** A lightly sleeping agent keeps this much of its memory resident; the rest goes out to swap. */
    SLEEP_RESIDENT_MB: configInt(64),
    /** auto: push sleeping agents' memory out when the host's swap is safe for it (docker/swap.ts); off: freeze only. */
    SLEEP_SWAP: z.enum(['auto', 'off']).default('auto'),
    /** How often idle instances are looked for. */
    SLEEP_CHECK_INTERVAL_SECONDS: configInt(15),
    /** Test-only fault injection: comma-separated step names where an operation pauses (see domain/faults.ts). */
    FAULT_PAUSE_AT: z.string().default(''),
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
