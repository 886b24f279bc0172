import type { contracts, Logger, TierTable } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import { describe } from '../docker/call.ts';
import type { LocalImages } from './images.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { InstanceLifecycle } from './lifecycle.ts';
import type { OpLocks } from './locks.ts';
import { POOL_USER, pooled } from './pool-owner.ts';
import { singleFlight } from './single-flight.ts';
import type { Sleeper } from './sleep.ts';

type TierName = contracts.TierName;

/** What the pool asks the create saga for. */
export type PoolCreate = { user_id: string; framework: string; tier: TierName; name: string };

export interface WarmPoolDeps {
  repo: InstanceRepo;
  locks: OpLocks;
  images: Pick<LocalImages, 'resolve' | 'envHas'>;
  sleeper: Pick<Sleeper, 'sleepLocked'>;
  lifecycle: Pick<InstanceLifecycle, 'finishDelete'>;
  /** The create saga (create.ts), run for the pool's owner. */
  create(input: PoolCreate): Promise<unknown>;
  /** WARM_POOL_JSON: framework → tier → agents kept. */
  sizes: Record<string, Partial<Record<TierName, number>>>;
  frameworkImages: Record<string, string>;
  version: string;
  tiers: TierTable;
  /** Docker answers (nothing is made or removed while it does not). */
  dockerUp: () => boolean;
  intervalSeconds: number;
  log: Logger;
}

/** How often the pool is looked at (a claim also starts a pass): a booted agent waits about this long for its checkpoint. */
const PASS_SECONDS = 3;

/** After a pool agent that could not be booted or checkpointed, no new one boots for this long: no loop of failures. */
const BACKOFF_MS = 60_000;

/**
 * The warm pool (docs/decisions/0063-...): per framework and tier, WARM_POOL_JSON agents of DEFAULT_VERSION booted
 * for real by the create saga under the pool's owner (pool-owner.ts), then checkpointed as a deep sleep does, so each
 * holds a few MB, its port, its volume and its sealed image until a create claims it (pool-claim.ts). Every pass:
 * - a ready pool agent (running, or frozen by a light sleep) is checkpointed;
 * - one that is no longer what a create would make (another image ID or version, the tier's limits changed), or that
 *   ended any other way than checkpointed (failed, stopped), is deleted, as are agents beyond the size;
 * - one agent is booted when the pool is short, and only while no other pool agent is booting: the pool never takes
 *   the host's CPUs from the agents that serve users.
 * Every replica may run it: each step is under the agent's lock and re-reads its row, and a second replica's extra
 * agent is deleted as one beyond the size.
 */
export class WarmPool {
  private readonly deps: WarmPoolDeps;
  private timer: NodeJS.Timeout | undefined;
  private backoffUntil = 0;
  /** Images already named in the log as unfit for the pool. */
  private readonly warned = new Set<string>();

  constructor(deps: WarmPoolDeps) {
    this.deps = deps;
  }

  /** Whether creates of this framework and tier may be served from the pool. */
  serves(framework: string, tier: string): boolean {
    return (this.deps.sizes[framework]?.[tier as TierName] ?? 0) > 0;
  }

  /** A create took an agent: refill now. */
  claimed(): void {
    void this.trigger();
  }

  start(): void {
    if (!this.entries().length) return;
    this.timer = setInterval(() => void this.trigger(), Math.max(1, this.deps.intervalSeconds) * 1000);
    this.timer.unref();
    void this.trigger();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  readonly trigger = singleFlight(
    () => this.pass(),
    (err) => {
      this.deps.log.warn({ err: describe(err) }, 'warm pool pass failed; will retry');
    },
  );

  private entries(): { framework: string; tier: TierName; size: number }[] {
    return Object.entries(this.deps.sizes).flatMap(([framework, tiers]) =>
      Object.entries(tiers)
        .filter(([, size]) => (size ?? 0) > 0)
        .map(([tier, size]) => ({ framework, tier: tier as TierName, size: size! })),
    );
  }

  private async pass(): Promise<void> {
    if (!this.deps.dockerUp()) return;
    let booting = false;
    const short: { framework: string; tier: TierName }[] = [];
    for (const e of this.entries()) {
      const image = `${this.deps.frameworkImages[e.framework]}:${this.deps.version}`;
      const digest = await this.deps.images.resolve(image).catch((err) => {
        if (!this.warned.has(image)) this.deps.log.warn({ image, err: describe(err) }, 'warm pool: its image is not here');
        this.warned.add(image);
        return undefined;
      });
      if (!digest) continue;
      // A claimed agent gets its owner's keys by a reload: its image must say how (AGENTHOST_RELOAD_URL).
      if (!(await this.deps.images.envHas(digest, 'AGENTHOST_RELOAD_URL'))) {
        if (!this.warned.has(digest))
          this.deps.log.warn({ image }, 'warm pool: the image does not say how its agent reloads keys (AGENTHOST_RELOAD_URL); none is booted');
        this.warned.add(digest);
        continue;
      }
      let kept = 0;
      for (const row of await this.deps.repo.pool(e.framework, e.tier)) {
        if (row.status === 'provisioning' || row.step !== 'done') {
          booting = true;
          kept++;
          continue;
        }
        const current = this.current(row, digest);
        if (current && kept < e.size && (await this.keep(row))) kept++;
        else {
          // An agent that failed (its boot, or after it) is not booted again at once: the next may fail the same way.
          if (row.status === 'failed') this.backoffUntil = Date.now() + BACKOFF_MS;
          await this.remove(row.id);
        }
      }
      if (kept < e.size) short.push(e);
    }
    // One boot at a time, across the whole pool.
    const next = short[0];
    if (booting || !next || Date.now() < this.backoffUntil) return;
    this.deps.log.info({ framework: next.framework, tier: next.tier }, 'warm pool: booting an agent');
    try {
      await this.deps.create({ user_id: POOL_USER, framework: next.framework, tier: next.tier, name: 'warm-pool' });
    } catch (err) {
      // No port left, Docker or keyvault away: users' creates come first; the pool tries again later, not every pass.
      this.deps.log.warn({ framework: next.framework, tier: next.tier, err: describe(err) }, 'warm pool: an agent could not be booted; trying again later');
      this.backoffUntil = Date.now() + BACKOFF_MS;
    }
  }

  /** Whether the agent is what a create of its framework and tier would make now. */
  private current(row: InstanceRow, digest: string): boolean {
    const l = this.deps.tiers[row.tier as TierName];
    return row.version === this.deps.version && row.image_digest === digest && row.memory_mb === l.memory_mb && row.cpus === l.cpus && row.pids === l.pids;
  }

  /** A pool agent worth keeping: checkpointed, or ready and now checkpointed. False: it goes. */
  private async keep(row: InstanceRow): Promise<boolean> {
    if (row.status === 'sleeping' && row.sleep_depth === 'checkpointed') return true;
    const asleepInIt = row.status === 'sleeping' && (row.sleep_depth === 'frozen' || row.sleep_depth === 'swapped');
    if (row.status !== 'running' && !asleepInIt) return false;
    const done = await this.deps.locks.tryWith(row.id, async () => {
      const fresh = await this.deps.repo.byId(row.id);
      if (!fresh || !pooled(fresh) || fresh.deleting_at || fresh.step !== 'done') return true; // claimed or busy: not ours to judge
      if (fresh.status === 'sleeping' && fresh.sleep_depth === 'checkpointed') return true;
      await this.deps.sleeper.sleepLocked(fresh, 'deep');
      const after = await this.deps.repo.byId(row.id);
      if (after?.sleep_depth === 'checkpointed') return true;
      this.deps.log.warn({ instance_id: row.id }, 'warm pool: the agent could not be checkpointed; the pool waits before booting another');
      this.backoffUntil = Date.now() + BACKOFF_MS;
      return false;
    });
    return done ?? true;
  }

  /** Delete a pool agent, unless a create claimed it meanwhile. */
  private async remove(id: string): Promise<void> {
    await this.deps.locks.tryWith(id, async () => {
      const fresh = await this.deps.repo.byId(id);
      if (!fresh || !pooled(fresh) || fresh.deleting_at) return;
      this.deps.log.info({ instance_id: id, status: fresh.status, sleep_depth: fresh.sleep_depth }, 'warm pool: agent removed');
      await this.deps.lifecycle.finishDelete(fresh);
    });
  }
}

/**
 * The warm pool where WARM_POOL_JSON asks for one and this provisioner can keep it: the docker driver with the
 * checkpointed sleep on and key hot reload on. Otherwise undefined, and the log says why.
 */
export function warmPool(
  o: { config: ProvisionerConfig; swarm: boolean; checkpoints: boolean; log: Logger },
  deps: Omit<WarmPoolDeps, 'sizes' | 'frameworkImages' | 'version' | 'intervalSeconds' | 'log'>,
): WarmPool | undefined {
  const { config, log } = o;
  const sizes = config.WARM_POOL_JSON;
  if (!Object.values(sizes).some((t) => Object.values(t).some((n) => (n ?? 0) > 0))) return undefined;
  const off = o.swarm
    ? 'the swarm driver cannot checkpoint'
    : !o.checkpoints
      ? 'the checkpointed sleep is off on this host'
      : config.KEYS_HOT_RELOAD !== 'on'
        ? 'KEYS_HOT_RELOAD is off: a claimed agent could not get its keys'
        : undefined;
  if (off) {
    log.warn({ reason: off }, `warm pool off: ${off}`);
    return undefined;
  }
  const unknown = Object.keys(sizes).filter((f) => !Object.hasOwn(config.FRAMEWORK_IMAGES, f));
  if (unknown.length) log.warn({ frameworks: unknown }, 'warm pool: WARM_POOL_JSON names frameworks that FRAMEWORK_IMAGES does not');
  const known = Object.fromEntries(Object.entries(sizes).filter(([f]) => !unknown.includes(f)));
  return new WarmPool({
    ...deps,
    sizes: known,
    frameworkImages: config.FRAMEWORK_IMAGES,
    version: config.DEFAULT_VERSION,
    intervalSeconds: PASS_SECONDS,
    log,
  });
}
