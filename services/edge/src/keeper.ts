import type { contracts, Logger } from '@agenthost/shared';

type Route = contracts.provisioner.Route;

export interface KeeperDeps {
  /** The provisioner's route table (provisioner.v1.routes.list): all instances, or one. */
  routes(instanceId?: string): Promise<Route[]>;
  log: Logger;
}

/**
 * The edge's route table, kept in memory beside Caddy: read whole at start, after a NATS reconnect and every
 * EDGE_RESYNC_SECONDS, and per instance when an event names it. Caddy asks it for the route of each request to an
 * instance host (answer.ts), so a change never touches Caddy's configuration (see README, Decisions: in Caddy 2.6
 * every configuration change cancels the requests in flight and closes every WebSocket).
 */
export class RouteKeeper {
  private readonly d: KeeperDeps;
  private table = new Map<string, Route>();
  private loaded = false;
  /** Bumped by every full pass, so a per-instance refresh that raced one does not bring back what it dropped. */
  private epoch = 0;

  constructor(deps: KeeperDeps) {
    this.d = deps;
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

  /** Read the whole table; resolves false (and keeps the old table) when the provisioner did not answer. */
  async resync(): Promise<boolean> {
    try {
      const routes = await this.d.routes();
      this.epoch++;
      const before = this.table.size;
      this.table = new Map(routes.map((r) => [r.instance_id, r]));
      if (!this.loaded || before !== this.table.size) this.d.log.info({ routes: this.table.size, before }, 'edge route table read');
      this.loaded = true;
      return true;
    } catch (err) {
      this.d.log.warn({ err: (err as Error).message }, 'edge route table not read; retrying');
      return false;
    }
  }

  /** An event named this instance: read its route again (the event is a hint, the provisioner's row the truth). */
  async refresh(instanceId: string): Promise<void> {
    const epoch = this.epoch;
    try {
      const [route] = await this.d.routes(instanceId);
      if (epoch !== this.epoch) return; // a full pass ran meanwhile and is at least as new
      if (route) this.table.set(instanceId, route);
      else this.table.delete(instanceId);
      this.d.log.info({ instance_id: instanceId, status: route?.status ?? 'removed' }, 'edge route');
    } catch (err) {
      this.d.log.warn({ instance_id: instanceId, err: (err as Error).message }, 'edge route not read; the next full pass catches up');
    }
  }
}
