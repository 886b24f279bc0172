import { connect as natsConnect, type NatsConnection } from 'nats';
import type { Logger } from '../logger.ts';

const disconnected = new WeakSet<NatsConnection>();

/** False while the client has lost its server (between a disconnect and the reconnect). */
export const busConnected = (nc: NatsConnection): boolean => !disconnected.has(nc) && !nc.isClosed();

/**
 * Connect to NATS and keep reconnecting forever: a service outlives a NATS restart. While the
 * connection is down, request() fails at once with a 503 instead of waiting for its timeout.
 */
export async function connectNats(url: string, name: string, log: Logger): Promise<NatsConnection> {
  const nc = await natsConnect({
    servers: url.split(','),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: false,
    pingInterval: 5000,
    // Without this the client builds an Error (a stack trace) for every request, to enrich rare failures.
    noAsyncTraces: true,
  });
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') disconnected.add(nc);
      if (s.type === 'reconnect') disconnected.delete(nc);
      if (s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'error') log.warn({ nats: s.type }, 'nats connection status');
    }
  })();
  return nc;
}
