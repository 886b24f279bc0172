import { z } from 'zod';
import { contract, event, userContract, userRead } from './contract.ts';
import { instanceId, isoTime, tierName, uuid, walletAddress } from './common.ts';

/**
 * The spec's four states, and `sleeping` (an addition): an idle instance the provisioner put to sleep (its volume,
 * keys, port and URL kept); the first request to its URL through the edge wakes it. How deeply: sleepDepth.
 */
export const instanceStatus = z.enum(['provisioning', 'running', 'stopped', 'failed', 'sleeping']);
/**
 * How a sleeping instance sleeps (docs/decisions/0052-two-sleep-depths.md): `frozen` (its processes paused, memory
 * kept; wakes in milliseconds), `swapped` (paused and its memory pushed out to the host's encrypted or compressed
 * swap; wakes in a fraction of a second), `checkpointed` (its processes dumped to an encrypted image, its container
 * holding nothing else; wakes by restoring them in seconds) or `stopped` (its container stopped; wakes by booting the
 * agent).
 */
export const sleepDepth = z.enum(['frozen', 'swapped', 'checkpointed', 'stopped']);
export type SleepDepth = z.infer<typeof sleepDepth>;
/** How an agent last stopped on its own: killed by the kernel for its memory limit, by a signal, or its own exit. */
export const exitKind = z.enum(['oom_killed', 'signal', 'exit']);

export const upgradeState = z.enum(['upgrading', 'upgraded', 'rolled_back']);
/** The last upgrade of an instance: upgrading until its agent is ready on the new image, then upgraded or rolled_back (with the reason). */
export const upgradeView = z.object({
  state: upgradeState,
  from_version: z.string(),
  to_version: z.string(),
  /** The image ID it ran before (what a rollback returns to). */
  from_digest: z.string().optional(),
  reason: z.string().optional(),
});
export type UpgradeView = z.infer<typeof upgradeView>;

/** A framework version: an image tag of the framework's image repository. */
const version = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'must be an image tag');

export const instanceView = z.object({
  instance_id: instanceId,
  name: z.string(),
  status: instanceStatus,
  framework: z.string(),
  version: z.string(),
  port: z.number().int(),
  url: z.string(),
  created_at: isoTime,
  estimated_ready: isoTime.optional(),
  uptime_seconds: z.number().optional(),
  cpu_usage_percent: z.number().optional(),
  memory_usage_mb: z.number().optional(),
  memory_limit_mb: z.number().optional(),
  last_activity: isoTime.optional(),
  failure_reason: z.string().optional(),
  /** Times the agent crashed and the provisioner started it again (self-healing). */
  restarts: z.number().int().optional(),
  /** Why the agent last stopped on its own (exit code, signal or out of memory), and when. */
  last_exit_reason: z.string().optional(),
  last_exit_kind: exitKind.optional(),
  /** Times the kernel killed the agent for exceeding its memory limit (each one also counts as a restart). */
  oom_kills: z.number().int().optional(),
  last_exit_at: isoTime.optional(),
  /** After a crash: when the agent is started again (the delay doubles with each crash in a row). */
  next_restart_at: isoTime.optional(),
  /** The image the instance runs, pinned at create or upgrade: the local image ID (sha256:…), never a moving tag. */
  image_digest: z.string().optional(),
  /** Its version's tag now names another image (rebuilt), or a newer version is available (update_version). */
  update_available: z.boolean().optional(),
  /** The version to upgrade to when update_available: its own version (tag rebuilt) or a newer one. */
  update_version: z.string().optional(),
  upgrade: upgradeView.optional(),
  /** A sleeping instance: how deeply it sleeps. */
  sleep_depth: sleepDepth.optional(),
});
export type InstanceView = z.infer<typeof instanceView>;

const owned = z.object({ user_id: uuid, instance_id: instanceId });

export const create = userContract(
  'provisioner.v1.instances.create',
  z.object({
    user_id: uuid,
    /** The owner's wallet: when its subscription ends (events.subscription.changed) its instances stop. */
    wallet_address: walletAddress.optional(),
    tier: tierName,
    /** A cancelled subscription keeps access but cannot create instances. */
    subscription_cancelled: z.boolean().default(false),
    name: z
      .string()
      .min(1)
      .max(63)
      .regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'letters, digits, space, dot, underscore, hyphen')
      .optional(),
    framework: z.string().min(1).max(50),
    version: version.optional(),
  }),
  instanceView.extend({
    /** Shown once: the OpenClaw gateway token that opens the instance's own UI/API (always in a create's answer). */
    access_token: z.string(),
  }),
);

export const get = userRead('provisioner.v1.instances.get', owned, instanceView);
export const list = userRead('provisioner.v1.instances.list', z.object({ user_id: uuid }), z.object({ instances: z.array(instanceView) }));
/** restart/start recreate the container; tier (from the caller's subscription) re-applies the tier's resource limits. */
const recreate = owned.extend({ tier: tierName.optional() });
const transition = z.object({
  success: z.boolean(),
  instance_id: instanceId,
  status: instanceStatus,
  /** Only when the old container (which carried the gateway token) was gone and a new token had to be minted. */
  access_token: z.string().optional(),
});
export const restart = userContract('provisioner.v1.instances.restart', recreate, transition);
export const stop = userContract('provisioner.v1.instances.stop', owned, z.object({ success: z.boolean(), instance_id: instanceId, status: instanceStatus }));
export const start = userContract('provisioner.v1.instances.start', recreate, transition);
export const remove = userContract('provisioner.v1.instances.delete', owned, z.object({ success: z.boolean(), instance_id: instanceId, deleted_at: isoTime }));
/**
 * Move the instance to the image `version` names now (its volume, port, URL, keys and access token kept). Answers
 * once the new container is started (status provisioning, upgrade upgrading); the agent's readiness decides the
 * rest: upgraded, or rolled_back by itself to the image it ran before.
 */
export const upgrade = userContract(
  'provisioner.v1.instances.upgrade',
  recreate.extend({
    version,
    /** How long the agent has to become ready on the new image before the upgrade is rolled back (default READY_TIMEOUT_SECONDS). */
    ready_timeout_seconds: z.number().int().min(5).max(3600).optional(),
  }),
  z.object({
    success: z.boolean(),
    instance_id: instanceId,
    status: instanceStatus,
    version: z.string(),
    image_digest: z.string().optional(),
    upgrade: upgradeView.optional(),
  }),
);
export const logs = userRead(
  'provisioner.v1.instances.logs',
  owned.extend({ tail: z.coerce.number().int().min(1).max(5000).default(200) }),
  z.object({ instance_id: instanceId, lines: z.array(z.string()) }),
);

/**
 * One page of a log follow (GET /instance/logs?follow=true): the lines after `after` (a line id; absent: the last
 * `tail` lines, or those since `since`), waiting up to `wait_ms` for the first one. The gateway asks for the next
 * page only after the previous one went out to its client, so a slow reader holds at most one page anywhere.
 */
export const logsPage = userRead(
  'provisioner.v1.instances.logs_page',
  owned.extend({
    /** The id of the last line received: its docker timestamp (RFC 3339, nanoseconds), then "~n" for the n-th line of the same timestamp. */
    after: z
      .string()
      .regex(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z(~\d{1,6})?$/)
      .optional(),
    /** Seconds since the epoch (fractions allowed): the first page starts there. */
    since: z.number().nonnegative().optional(),
    tail: z.number().int().min(0).max(5000).default(200),
    limit: z.number().int().min(1).max(1000).default(500),
    wait_ms: z.number().int().min(0).max(20_000).default(10_000),
  }),
  z.object({
    instance_id: instanceId,
    lines: z.array(z.object({ id: z.string(), text: z.string() })),
    /** false when the container is not running: no line follows until it starts again. */
    running: z.boolean(),
  }),
);

export type LogsPageInput = z.output<typeof logsPage.input>;
export type LogsPageOutput = z.output<typeof logsPage.output>;

/** Per-user usage that feeds /usage/metrics and /subscription/status. */
export const usage = userRead(
  'provisioner.v1.usage.get',
  z.object({ user_id: uuid }),
  z.object({
    instances_active: z.number().int(),
    storage_used_mb: z.number(),
    /** Over the user's instances: crashes restarted and OOM kills so far, and the live CPU and memory of the running ones. */
    restarts: z.number().int().default(0),
    oom_kills: z.number().int().default(0),
    cpu_usage_percent: z.number().default(0),
    memory_usage_mb: z.number().default(0),
  }),
);

// ---------------------------------------------------------------- backups

export const backupId = z.string().regex(/^bk-[a-f0-9]{20}$/, 'must be a backup id (bk-…)');
export const backupView = z.object({
  backup_id: backupId,
  /** The instance it was taken of (which may since have been deleted: its backups stay until deleted or dropped). */
  instance_id: instanceId,
  size_bytes: z.number().int(),
  created_at: isoTime,
  kind: z.enum(['manual', 'scheduled']),
});
export type BackupView = z.infer<typeof backupView>;

/** Take a backup of the instance now (its agent is paused for the copy); tier: the retention to apply. */
export const backup = userContract('provisioner.v1.backups.create', owned.extend({ tier: tierName }), backupView);
/** The backups of an instance id of the caller's, newest first (also of a deleted instance). */
export const backups = userRead('provisioner.v1.backups.list', owned, z.object({ instance_id: instanceId, backups: z.array(backupView) }));
/** Replace the instance's data with the backup's and restart it; the access token is rotated and shown once. */
export const restore = userContract(
  'provisioner.v1.backups.restore',
  owned.extend({ backup_id: backupId, tier: tierName.optional() }),
  transition.extend({ access_token: z.string(), backup_id: backupId }),
);
/** A new instance (counted like a create) holding a backup of the instance {instance_id}, which may since have been deleted. */
export const clone = userContract(
  'provisioner.v1.backups.clone',
  create.input.omit({ framework: true, version: true }).extend({ instance_id: instanceId, backup_id: backupId }),
  instanceView.extend({ access_token: z.string(), backup_id: backupId, cloned_from: instanceId }),
);
export const removeBackup = userContract(
  'provisioner.v1.backups.delete',
  owned.extend({ backup_id: backupId }),
  z.object({ success: z.boolean(), instance_id: instanceId, backup_id: backupId }),
);
/** A backup was taken (manual or scheduled). */
export const instanceBackup = event('events.instance.backup', backupView.extend({ user_id: uuid }));

export const instanceCreated = event('events.instance.created', z.object({ instance_id: instanceId, user_id: uuid, created_at: isoTime }));
/**
 * Every change of an instance's status, in order per instance: provisioning (created, started, restarted, moved),
 * running (its agent answered /readyz), stopped, failed (with the reason; a new reason is a new event). `seq`
 * orders the events of one deployment; `generation` tells which start of the instance an event belongs to.
 */
export const instanceStatusChanged = event(
  'events.instance.status',
  z.object({
    instance_id: instanceId,
    user_id: uuid,
    status: instanceStatus,
    at: isoTime,
    failure_reason: z.string().optional(),
    generation: z.number().int(),
    seq: z.number().int(),
    /** A crash the self-healing restarts: its exit reason, the restarts so far and when the next is due. */
    restarts: z.number().int().optional(),
    exit_reason: z.string().optional(),
    exit_kind: exitKind.optional(),
    next_restart_at: isoTime.optional(),
    /** An upgrade's progress: upgrading (started), upgraded (ready on the new image), rolled_back (with upgrade_reason). */
    upgrade: upgradeState.optional(),
    upgrade_reason: z.string().optional(),
    /** sleeping: how deeply. */
    sleep_depth: sleepDepth.optional(),
    /** provisioning after a wake that could not resume the paused agent: why, and that it boots instead. */
    wake_warning: z.string().optional(),
  }),
);
export const instanceDeleted = event('events.instance.deleted', z.object({ instance_id: instanceId, user_id: uuid, deleted_at: isoTime }));

/**
 * Where the edge sends an instance's traffic: its agent's address (host:port, reachable from the edge's host) and its
 * status; and the hex SHA-256 of its access token (the provisioner keeps only that), with which the edge tells its
 * owner's requests from anyone else's: only those wake it and count as traffic.
 */
export const route = z.object({ instance_id: instanceId, status: instanceStatus, upstream: z.string(), token_sha256: z.string() });
export type Route = z.infer<typeof route>;
/**
 * Every instance's route (the edge rebuilds its table from it), or one instance's (after an event about it: an
 * event is a hint, the provisioner's row is the truth). Between services: NATS permissions give it to the edge only.
 */
export const routes = contract('provisioner.v1.routes.list', z.object({ instance_id: instanceId.optional() }), z.object({ routes: z.array(route) }));

/**
 * The edge reports the instances that had their owner's traffic through it since its last report (a request with their
 * token or session asked their route, or such a client's connection is still open): the provisioner puts an instance to sleep only after none for its tier's idle time.
 */
export const activity = contract(
  'provisioner.v1.routes.activity',
  z.object({ instance_ids: z.array(instanceId).max(10_000) }),
  z.object({ recorded: z.number().int() }),
);
/** The edge holds a request to a sleeping instance and asks for it to be woken (started); idempotent. */
export const wake = contract(
  'provisioner.v1.routes.wake',
  z.object({ instance_id: instanceId }),
  z.object({ instance_id: instanceId, status: instanceStatus }),
);
