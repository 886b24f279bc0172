/**
 * devchain: a local, in-memory Solana cluster stand-in for development and tests.
 * Speaks Solana JSON-RPC (HTTP) and PubSub (WebSocket, same port and port+1) so that an
 * unmodified @solana/web3.js v1 Connection works against it.
 */
import type { Server } from 'node:http';
import { Chain } from './chain.ts';
import { resolveConfig } from './config.ts';
import type { DevchainConfig, DevchainOptions } from './config.ts';
import { createMethods } from './methods.ts';
import { PubSub } from './pubsub.ts';
import { createTransport } from './server.ts';

export { DEFAULT_CONFIG, DEFAULT_PROGRAM_ID, DEFAULT_TREASURY, configFromEnv, resolveConfig } from './config.ts';
export type { DevchainConfig, DevchainOptions, Prices } from './config.ts';
export { FAUCET } from './chain.ts';
export { rentExemptMinimum } from './accounts.ts';
export { LAMPORTS_PER_SIGNATURE } from './runtime.ts';

export interface Devchain {
  /** JSON-RPC endpoint, e.g. http://127.0.0.1:8899 */
  url: string;
  /** PubSub endpoint on the same port. */
  wsUrl: string;
  /** PubSub (and JSON-RPC) on port+1, where web3.js looks by default; null when disabled. */
  wsAliasUrl: string | null;
  /** Effective configuration (port is the bound port). */
  config: DevchainConfig;
  /** Moves the chain clock forward; returns the new unix time (seconds). */
  advanceClock(seconds: number): number;
  /** Current chain time (unix seconds). */
  now(): number;
  close(): Promise<void>;
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      const addr = server.address();
      resolve(typeof addr === 'object' && addr !== null ? addr.port : port);
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

function urlHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** Starts a devchain in this process. Options default to DEFAULT_CONFIG; port 0 picks free ports. */
export async function startDevchain(options: DevchainOptions = {}): Promise<Devchain> {
  const { config, errors } = resolveConfig(options);
  if (errors.length) throw new Error(`invalid devchain config:\n  ${errors.join('\n  ')}`);
  const chain = new Chain(config);
  const methods = createMethods(chain);
  const pubsub = new PubSub(chain);
  const transport = createTransport(methods, pubsub);

  let main: Server | undefined;
  let alias: Server | null = null;
  let port = config.port;
  for (let attempt = 0; ; attempt++) {
    main = transport.createHttpServer();
    port = await listen(main, config.port, config.host);
    if (!config.wsPortAlias) break;
    alias = transport.createHttpServer();
    try {
      if (port >= 65535) throw Object.assign(new Error('no port+1'), { code: 'EADDRINUSE' });
      await listen(alias, port + 1, config.host);
      break;
    } catch (e) {
      await closeServer(main);
      alias = null;
      if (config.port !== 0 || attempt >= 20) {
        throw new Error(
          `cannot listen on port ${port + 1} (WebSocket alias of ${port}, where web3.js connects): ${(e as Error).message}; free it or set DEVCHAIN_WS_PORT_ALIAS=false`,
        );
      }
    }
  }
  const host = urlHost(config.host);
  // web3.js looks for PubSub on port+1, so that is the address a node would advertise.
  chain.contact = { rpc: `${host}:${port}`, pubsub: `${host}:${alias ? port + 1 : port}` };
  chain.clock.start();
  const servers = alias ? [main, alias] : [main];
  let closed: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    wsUrl: `ws://${host}:${port}`,
    wsAliasUrl: alias ? `ws://${host}:${port + 1}` : null,
    config: { ...config, port },
    advanceClock: (seconds) => chain.clock.advance(seconds),
    now: () => chain.clock.now(),
    close() {
      closed ??= (async () => {
        chain.clock.stop();
        // Close code 1000 tells web3.js (rpc-websockets) not to reconnect.
        await Promise.all(
          [...transport.wss.clients].map(
            (ws) =>
              new Promise<void>((resolve) => {
                const timer = setTimeout(() => {
                  ws.terminate();
                  resolve();
                }, 500);
                ws.once('close', () => {
                  clearTimeout(timer);
                  resolve();
                });
                ws.close(1000, 'devchain closing');
              }),
          ),
        );
        transport.wss.close();
        await Promise.all(servers.map(closeServer));
      })();
      return closed;
    },
  };
}
