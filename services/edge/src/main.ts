// The edge's route keeper: runs beside Caddy (same host) and answers Caddy, for each request to an instance host,
// where that instance runs or why it cannot be reached. It follows the instances through the provisioner.
import { setTimeout as sleep } from 'node:timers/promises';
import { contracts, listen, type Listened, request, runService } from '@agenthost/shared';
import { Activity } from './activity.ts';
import { answerServer, listenOnSocket } from './answer.ts';
import { edgeConfig } from './config.ts';
import { RouteKeeper } from './keeper.ts';
import { serveNodeStats } from './node-stats.ts';
import { keeperSocket } from './settings.ts';

const P = contracts.provisioner;

await runService<typeof edgeConfig, unknown>({
  name: 'edge',
  version: '1.0.0',
  config: edgeConfig,
  async build({ config, nc, log }) {
    const timeoutMs = config.NATS_REQUEST_TIMEOUT_MS;
    const activity = new Activity({
      log,
      port: config.EDGE_HTTPS_PORT,
      report: async (instance_ids) => void (await request(nc, P.activity, { instance_ids }, { timeoutMs })),
    });
    const keeper = new RouteKeeper({
      log,
      routes: async (instance_id) => (await request(nc, P.routes, instance_id ? { instance_id } : {}, { timeoutMs })).routes,
      wake: async (instance_id) => (await request(nc, P.wake, { instance_id }, { timeoutMs: Math.max(timeoutMs, 30_000) })).status,
      // Not yet reported when the provisioner found it idle: within one report's interval, plus the sleep's own wait
      // for the edges (500 ms) and the way of a report and an event.
      justUsed: (id) => activity.usedWithin(id, config.EDGE_ACTIVITY_SECONDS * 1000 + 2000),
    });
    const server = answerServer(keeper, config.EDGE_DOMAIN, { activity, wakeTimeoutMs: config.EDGE_WAKE_TIMEOUT_SECONDS * 1000 });
    // ACME on demand asks over HTTP: a loopback port, only when ACME is configured.
    const ask = config.EDGE_ACME_EMAIL ? answerServer(keeper, config.EDGE_DOMAIN) : undefined;
    let stopped = false;
    const subs: Array<{ unsubscribe(): void }> = [];
    let activityTimer: NodeJS.Timeout | undefined;
    return {
      endpoints: [],
      async start() {
        // Events are hints (core subscriptions to what the provisioner publishes on JetStream): the route of the
        // instance they name is read again. Subscribed before the first full read, so nothing falls between.
        const hints: Listened<{ instance_id: string }>[] = [P.instanceCreated, P.instanceStatusChanged, P.instanceDeleted];
        for (const ev of hints) subs.push(listen(nc, ev, (p) => keeper.refresh(p.instance_id), log));
        // Events sent while the connection was down are lost: a full read after every reconnect.
        void (async () => {
          for await (const s of nc.status()) if (s.type === 'reconnect') void keeper.resync();
        })();
        if (config.EDGE_NODE_ID) subs.push(serveNodeStats(nc, { nodeId: config.EDGE_NODE_ID, cgroupRoot: config.EDGE_CGROUP_ROOT, log }));
        await listenOnSocket(server, keeperSocket(config));
        if (ask) await new Promise<void>((resolve) => ask.listen(config.EDGE_ASK_PORT, '127.0.0.1', resolve));
        activityTimer = setInterval(() => void activity.flush(), config.EDGE_ACTIVITY_SECONDS * 1000);
        // The provisioner may not be up yet: start anyway (instance hosts answer 503 until the first read).
        await keeper.resync();
        void (async () => {
          let last = Date.now();
          while (!stopped) {
            await sleep(keeper.ready ? 1000 : 250);
            if (!keeper.ready || Date.now() - last >= config.EDGE_RESYNC_SECONDS * 1000) {
              last = Date.now();
              await keeper.resync();
            }
          }
        })();
      },
      async stop() {
        stopped = true;
        clearInterval(activityTimer);
        for (const s of subs) s.unsubscribe();
        server.close();
        ask?.close();
      },
    };
  },
});
