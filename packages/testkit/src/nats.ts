import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, type ConnectionOptions, type NatsConnection } from 'nats';
import type { StartedTestContainer } from 'testcontainers';
import { ensureNatsTls, natsOptions, OPERATOR, writeNatsAuth } from '@agenthost/shared';
import { containerPid, startNatsContainer, stopContainer } from './containers.ts';
import { freePort, waitForPort } from './ports.ts';

export interface NatsServer {
  url: string;
  port: number;
  /** NATS_URL, NATS_NKEY_SEED_FILE and NATS_CA_FILE for one service: its own identity only. */
  envFor(service: string): Record<string, string>;
  /** Connection options of an identity (default: the operator, who may use every subject). */
  options(who?: string): ConnectionOptions;
  /** The server's process id (benchmarks measure its CPU). */
  pid(): number | undefined;
  /** A connection as an identity (default: the operator); the caller closes it. */
  connect(who?: string): Promise<NatsConnection>;
  stop(): Promise<void>;
  pause(): Promise<void>;
  /** Start it again on the same port and store (JetStream data survives); `jetstream` turns JetStream on or off. */
  restart(opts?: { jetstream?: boolean }): Promise<void>;
}

/**
 * A private nats-server with JetStream for one test suite, configured as deploy configures it: TLS
 * (one CA per test run) and one nkey user per service with the permissions of the shared table.
 */
export async function startNats(opts: { jetstream?: boolean } = {}): Promise<NatsServer> {
  const port = await freePort();
  const storeDir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-nats-'));
  const tls = ensureNatsTls(path.join(os.tmpdir(), 'agenthost-nats-tls'));
  // jetstream: false, a server whose JetStream does not answer (as while a cluster has no quorum); seeds are kept across writes.
  const configure = (jetstream = true) =>
    writeNatsAuth(path.join(storeDir, 'auth'), {
      host: '127.0.0.1',
      port,
      storeDir: path.join(storeDir, 'js'),
      tls,
      ...(jetstream ? {} : { extra: { jetstream: false } }),
    });
  const auth = configure(opts.jetstream);
  const url = `nats://127.0.0.1:${port}`;
  const options = (who: string = OPERATOR) => natsOptions({ url, seedFile: auth.seeds[who]!, caFile: tls.ca, ...(who === OPERATOR ? {} : { service: who }) });
  let container: StartedTestContainer | undefined;
  let pid: number | undefined;
  const tlsDir = path.dirname(tls.ca);
  const launch = async () => {
    container = await startNatsContainer(auth.configFile, [storeDir, tlsDir]);
    pid = await containerPid(container);
    await waitForPort(port);
  };
  const halt = async () => {
    const c = container;
    container = undefined;
    pid = undefined;
    if (c) await stopContainer(c);
  };
  await launch();
  return {
    url,
    port,
    envFor: (service) => ({ NATS_URL: url, NATS_NKEY_SEED_FILE: auth.seeds[service]!, NATS_CA_FILE: tls.ca }),
    options,
    connect: (who) => connect(options(who)),
    pid: () => pid,
    async restart(o = {}) {
      if (o.jetstream !== undefined) configure(o.jetstream);
      await launch();
    },
    /** Stop the server but keep its store, so restart() brings JetStream back with its data. */
    pause: halt,
    async stop() {
      await halt();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
