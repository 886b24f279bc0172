import type Docker from 'dockerode';
import { replaceTasks } from './apply.ts';

/** How long the event stream may take to answer after a deploy, and again after each restart of the NATS servers. */
const PATIENCE_MS = 90_000;

/**
 * After a deploy, the event stream (JetStream, on the three NATS servers) must answer through a gateway: creates,
 * deletes, webhooks and event streams need it. nats-server 2.10 can come up with one route between two servers
 * missing after they connected to each other at once (its duplicate-route handling; fixed upstream after 2.10, in
 * nats-server's pull requests 8454 and 8527). The raft traffic of JetStream's metadata goes over that route, so the
 * cluster never elects a leader, and every event publish times out while the rest of the platform looks healthy.
 * Restarting the NATS servers one at a time makes their routes again; their stores keep every stream and consumer.
 */
export async function ensureEventStream(docker: Docker, readyUrl: string, natsServices: string[], log: (s: string) => void): Promise<void> {
  if (await answers(readyUrl, PATIENCE_MS)) return;
  log(`the event stream (JetStream) does not answer after ${PATIENCE_MS / 1000} s: restarting the NATS servers one at a time`);
  for (const name of natsServices) {
    await replaceTasks(docker, name, 1, 240_000, { Order: 'stop-first' });
    log(`${name} restarted`);
  }
  if (await answers(readyUrl, PATIENCE_MS)) {
    log('the event stream answers again');
    return;
  }
  throw new Error(
    `the event stream (JetStream) does not answer at ${readyUrl} ("events" stays "unavailable"), even after the NATS servers were restarted: see their logs (docker service logs ${natsServices[0]})`,
  );
}

/** Whether the gateway's readiness says "events": "ok" within `ms`. */
async function answers(readyUrl: string, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    const body = (await fetch(readyUrl, { signal: AbortSignal.timeout(5000) })
      .then((r) => r.json())
      .catch(() => undefined)) as { events?: string } | undefined;
    if (body?.events === 'ok') return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 1000));
  }
}
