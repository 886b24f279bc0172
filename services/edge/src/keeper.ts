import { setTimeout as sleep } from 'node:timers/promises';
import type { contracts, Logger } from '@agenthost/shared';

type Route = contracts.provisioner.Route;

export interface KeeperDeps {
  /** The provisioner's route table (provisioner.v1.routes.list): all instances, or one. */
  routes(instanceId?: string): Promise<Route[]>;
  /** Ask the provisioner to wake a sleeping instance (provisioner.v1.routes.wake); resolves to its status then. */
  wake(instanceId: string): Promise<string | undefined>;
  /**
   * Whether its owner's request reached this edge so recently that the provisioner cannot have counted it when it
   * found the instance idle (main.ts): a request that may already be inside the agent, sent on before this edge heard
   * that it sleeps (so not held for a wake), which would wait there until the next wake.
   */
  justUsed?(instanceId: string): boolean;
  log: Logger;
}

const WAKE_POLL_MS = 100;
/** While waiting for a woken instance, its route is read again this often in case an event was missed. */
const WAKE_REREAD_MS = 2000;
/** How long the wake of an instance that fell asleep under its owner's request is waited for. */
const REWAKE_TIMEOUT_MS = 60_000;

/**
 * The edge's route table, kept in memory beside Caddy: read whole at start, after a NATS reconnect and every
 * EDGE_RESYNC_SECONDS, and per instance when an event names it. Caddy asks it for the route of each request to an
 * instance host (answer.ts), so a change never touches Caddy's configuration (see README, Decisions: in Caddy 2.6
 * every configuration change cancels the requests in flight and closes every WebSocket).
 */
export class RouteKeeper {
  private readonly deps: KeeperDeps;
  private table = new Map<string, Route>();
  private loaded = false;
  /** Bumped by every full pass, so a per-instance refresh that raced one does not bring back what it dropped. */
  private epoch = 0;
  /** Wakes in progress: every request held for an instance waits on the same one. */
  private readonly waking = new Map<string, Promise<Route | null | undefined>>();

  constructor(deps: KeeperDeps) {
    this.deps = deps;
  }

  /** True once the table was read whole at least once (before that, instance hosts are answered 503). */
  get ready(): boolean {
    return this.loaded;
  }

  get size(): number {
    return this.table.size;
  }

  get(instanceId: string): Route | undefined {
    return this.table.get(instanceId);
  }

  /**
   * Wake a sleeping instance and wait, up to timeoutMs, until it is no longer asleep or starting: its route then
   * (running, or failed; null: deleted meanwhile), or undefined at the timeout; rejects when the provisioner could not
   * start it. Events bring the change; the route is also re-read every 2 s.
   */
  awaken(instanceId: string, timeoutMs: number): Promise<Route | null | undefined> {
    let p = this.waking.get(instanceId);
    if (!p) {
      p = this.wakeAndWait(instanceId, Date.now() + timeoutMs).finally(() => this.waking.delete(instanceId));
      this.waking.set(instanceId, p);
    }
    return p;
  }

  private async wakeAndWait(instanceId: string, deadline: number): Promise<Route | null | undefined> {
    const settled = () => {
      const r = this.table.get(instanceId);
      if (!r) return null;
      return r.status !== 'sleeping' && r.status !== 'provisioning' ? r : undefined;
    };
    try {
      // A frozen agent is running again when this answers: its route is read at once rather than at the event.
      if ((await this.deps.wake(instanceId)) === 'running') await this.refresh(instanceId);
    } catch (err) {
      // The provisioner cannot start it now (Docker or the provisioner down): the held requests are answered at once.
      this.deps.log.warn({ instance_id: instanceId, err: (err as Error).message }, 'could not wake a sleeping instance');
      throw err;
    }
    this.deps.log.info({ instance_id: instanceId }, 'waking a sleeping instance for a request');
    let reread = Date.now() + WAKE_REREAD_MS;
    while (Date.now() < deadline) {
      const r = settled();
      if (r !== undefined) return r;
      if (Date.now() >= reread) {
        reread = Date.now() + WAKE_REREAD_MS;
        await this.refresh(instanceId);
        continue;
      }
      await sleep(WAKE_POLL_MS);
    }
    return settled();
  }

  /** Read the whole table; resolves false (and keeps the old table) when the provisioner did not answer. */
  async resync(): Promise<boolean> {
    try {
      const routes = await this.deps.routes();
      this.epoch++;
      const before = this.table.size;
      this.table = new Map(routes.map((r) => [r.instance_id, r]));
      if (!this.loaded || before !== this.table.size) this.deps.log.info({ routes: this.table.size, before }, 'edge route table read');
      this.loaded = true;
      return true;
    } catch (err) {
      this.deps.log.warn({ err: (err as Error).message }, 'edge route table not read; retrying');
      return false;
    }
  }

  /** An event named this instance: read its route again (the event is a hint, the provisioner's row the truth). */
  async refresh(instanceId: string): Promise<void> {
    const epoch = this.epoch;
    try {
      const [route] = await this.deps.routes(instanceId);
      if (epoch !== this.epoch) return; // a full pass ran meanwhile and is at least as new
      const before = this.table.get(instanceId)?.status;
      if (route) this.table.set(instanceId, route);
      else this.table.delete(instanceId);
      this.deps.log.info({ instance_id: instanceId, status: route?.status ?? 'removed' }, 'edge route');
      if (route?.status === 'sleeping' && before !== 'sleeping' && this.deps.justUsed?.(instanceId)) {
        this.deps.log.info({ instance_id: instanceId }, "an instance fell asleep under its owner's request: waking it");
        void this.awaken(instanceId, REWAKE_TIMEOUT_MS);
      }
    } catch (err) {
      this.deps.log.warn({ instance_id: instanceId, err: (err as Error).message }, 'edge route not read; the next full pass catches up');
    }
  }
}
