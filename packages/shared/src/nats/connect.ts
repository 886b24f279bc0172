import { connect as natsConnect, type NatsConnection } from 'nats';
import type { Logger } from '../logger.ts';

/**
 * Connect to NATS and keep reconnecting forever: a service outlives a NATS restart. Requests made
 * while disconnected fail after their timeout and become 503s at the gateway.
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
      if (s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'error') log.warn({ nats: s.type }, 'nats connection status');
    }
  })();
  return nc;
}
