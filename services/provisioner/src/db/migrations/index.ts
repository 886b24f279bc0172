import type { Migration } from 'kysely';

// Migrations are frozen: each records what ran on every existing database, and a new database replays them in
// order. So lease_instance and note_status_change are restated whole by the migration that replaced them rather
// than shared through a module (editing a shared body would change what an old migration does on a new database).
// Their current bodies: lease_instance in 2026-11-22T06-00-00-lease-async-commit, note_status_change in
// 2026-11-27T10-00-00-image-pinning. A change to either is a new migration with the whole new body; see
// docs/architecture.md, "Migrations and the plpgsql functions they restate".
import * as init from './2026-11-22T00-00-00-init.ts';
import * as lease from './2026-11-22T00-00-01-lease-function.ts';
import * as wallet from './2026-11-22T05-00-00-wallet.ts';
import * as leaseAsync from './2026-11-22T06-00-00-lease-async-commit.ts';
import * as nodeHost from './2026-11-23T12-00-00-node-host.ts';
import * as statusOutbox from './2026-11-23T18-00-00-status-outbox.ts';
import * as selfHealing from './2026-11-23T19-00-00-self-healing.ts';
import * as backups from './2026-11-23T20-00-00-backups.ts';
import * as oomKills from './2026-11-23T21-00-00-oom-kills.ts';
import * as imagePinning from './2026-11-27T10-00-00-image-pinning.ts';
import * as idleSleep from './2026-11-27T12-00-00-idle-sleep.ts';
import * as sleepDepths from './2026-11-28T14-00-00-sleep-depths.ts';
import * as checkpoints from './2026-11-29T08-00-00-checkpoints.ts';
import * as bootRetries from './2026-11-30T08-00-00-boot-retries.ts';
import * as warmPool from './2026-12-01T10-00-00-warm-pool.ts';

export const migrations: Record<string, Migration> = {
  '2026-11-22T00-00-00-init': init,
  '2026-11-22T00-00-01-lease-function': lease,
  '2026-11-22T05-00-00-wallet': wallet,
  '2026-11-22T06-00-00-lease-async-commit': leaseAsync,
  '2026-11-23T12-00-00-node-host': nodeHost,
  '2026-11-23T18-00-00-status-outbox': statusOutbox,
  '2026-11-23T19-00-00-self-healing': selfHealing,
  '2026-11-23T20-00-00-backups': backups,
  '2026-11-23T21-00-00-oom-kills': oomKills,
  '2026-11-27T10-00-00-image-pinning': imagePinning,
  '2026-11-27T12-00-00-idle-sleep': idleSleep,
  '2026-11-28T14-00-00-sleep-depths': sleepDepths,
  '2026-11-29T08-00-00-checkpoints': checkpoints,
  '2026-11-30T08-00-00-boot-retries': bootRetries,
  '2026-12-01T10-00-00-warm-pool': warmPool,
};
