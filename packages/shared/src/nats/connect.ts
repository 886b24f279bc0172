import { readFileSync } from 'node:fs';
import { connect as natsConnect, nkeyAuthenticator, type ConnectionOptions, type NatsConnection } from 'nats';
import type { Logger } from '../logger.ts';
import { inboxPrefixFor } from './permissions.ts';

const disconnected = new WeakSet<NatsConnection>();

/** False while the client has lost its server (between a disconnect and the reconnect). */
export const busConnected = (nc: NatsConnection): boolean => !disconnected.has(nc) && !nc.isClosed();

export interface NatsIdentity {
  /** Comma-separated server URLs. */
  url: string;
  /** The service this connection speaks for: its inbox prefix must match its NATS permissions. */
  service?: string;
  /** The nkey seed file of this identity (NATS_NKEY_SEED_FILE). */
  seedFile?: string;
  /** The CA that signed the server's certificate (NATS_CA_FILE): with it, the connection is TLS. */
  caFile?: string;
}

/** The connection options of an identity: TLS verified against our CA, nkey authentication, own inbox. */
export function natsOptions(id: NatsIdentity): ConnectionOptions {
  return {
    servers: id.url.split(','),
    ...(id.seedFile ? { authenticator: nkeyAuthenticator(new TextEncoder().encode(readFileSync(id.seedFile, 'utf8').trim())) } : {}),
    ...(id.caFile ? { tls: { caFile: id.caFile } } : {}),
    ...(id.service ? { inboxPrefix: inboxPrefixFor(id.service) } : {}),
  };
}

/**
 * Connect to NATS and keep reconnecting forever: a service outlives a NATS restart. While the
 * connection is down, request() fails at once with a 503 instead of waiting for its timeout.
 * A refused identity or permission is logged as an error (it will not heal by retrying).
 */
export async function connectNats(id: NatsIdentity, name: string, log: Logger): Promise<NatsConnection> {
  const nc = await natsConnect({
    ...natsOptions(id),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    // A server that went away with its address (a killed swarm task: its name resolved to it a moment longer) never
    // answers the connect: the default 20 s handshake wait was a gateway's 20 s of 503s after one NATS node was killed.
    timeout: 3000,
    waitOnFirstConnect: false,
    pingInterval: 5000,
    // Without this the client builds an Error (a stack trace) for every request, to enrich rare failures.
    noAsyncTraces: true,
  });
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') disconnected.add(nc);
      if (s.type === 'reconnect') disconnected.delete(nc);
      if (s.type === 'error') log.error({ nats: s.type, data: String(s.data) }, 'nats refused an operation (permissions or authorization)');
      else if (s.type === 'disconnect' || s.type === 'reconnect') log.warn({ nats: s.type }, 'nats connection status');
    }
  })();
  return nc;
}

/** The identity a service's config describes. */
export const natsIdentity = (
  config: { NATS_URL: string; NATS_NKEY_SEED_FILE?: string | undefined; NATS_CA_FILE?: string | undefined },
  service: string,
): NatsIdentity => ({
  url: config.NATS_URL,
  service,
  ...(config.NATS_NKEY_SEED_FILE ? { seedFile: config.NATS_NKEY_SEED_FILE } : {}),
  ...(config.NATS_CA_FILE ? { caFile: config.NATS_CA_FILE } : {}),
});
