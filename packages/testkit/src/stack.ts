import { randomBytes } from 'node:crypto';
import type { DevchainOptions } from '@agenthost/devchain';
import { createDatabase, type TestDatabase } from './db.ts';
import { busKeys, newSigningKeyPem } from './secrets.ts';
import { apiClient, type ApiClient } from './http.ts';
import { startNats, type NatsServer } from './nats.ts';
import { freePort } from './ports.ts';
import { spawnService, type ServiceProcess } from './service.ts';
import type { StackChain } from './subscribe.ts';

export type ServiceName = 'auth' | 'billing-chain' | 'provisioner' | 'keyvault';

export interface StackOptions {
  services: ServiceName[];
  /** Environment for every process. */
  env?: Record<string, string>;
  /** Environment per process (gateway included). */
  serviceEnv?: Partial<Record<ServiceName | 'gateway', Record<string, string>>>;
  /** Number of gateway replicas (default 1). */
  gateways?: number;
  /**
   * Start a devchain in this process (free port) and point every service at it (SOLANA_RPC_URL,
   * SUBSCRIPTION_PROGRAM_ID, TREASURY). true = defaults; an object = devchain options (prices, slotMs...).
   */
  devchain?: boolean | DevchainOptions;
}

export interface Stack {
  nats: NatsServer;
  db: TestDatabase;
  env: Record<string, string>;
  /** The environment of one service of this stack: `env` plus that service's own NATS identity. */
  envFor(name: ServiceName | 'gateway'): Record<string, string>;
  services: Map<ServiceName, ServiceProcess>;
  gateways: ServiceProcess[];
  /** Base URL of the first gateway, including /api. */
  baseUrl: string;
  api: ApiClient;
  /** The devchain of this stack (startStack({ devchain: true })); use chainClient(stack) / subscribe(stack, session). */
  chain?: StackChain;
  /** Start one more replica of a service (same environment). */
  addReplica(name: ServiceName | 'gateway', label: string): Promise<ServiceProcess>;
  stop(): Promise<void>;
}

/** A private system for one suite: its own nats-server, its own database, real service processes. */
export async function startStack(opts: StackOptions): Promise<Stack> {
  const nats = await startNats();
  const db = await createDatabase();
  const chain = opts.devchain ? await startChain(opts.devchain === true ? {} : opts.devchain) : undefined;
  // The first gateway's port is chosen up front so services can tell instances where it is.
  const gatewayPort = await freePort();
  const env: Record<string, string> = {
    GATEWAY_PORT: String(gatewayPort),
    NATS_URL: nats.url,
    NATS_REQUEST_TIMEOUT_MS: '3000',
    // auth's signing key, as deploy gives it (a file would do as well; tests may set their own).
    AUTH_JWT_PRIVATE_KEY: newSigningKeyPem(),
    MASTER_KEY_ENCRYPTION: randomBytes(32).toString('base64'),
    // The gateway signs an assertion for every call it makes for a user; keyvault opens what it seals.
    GATEWAY_ASSERTION_PRIVATE_KEY: busKeys().assertionPem,
    GATEWAY_ASSERTION_PUBLIC_KEYS: busKeys().assertionPublic,
    KEYVAULT_SEAL_PRIVATE_KEY: busKeys().sealPem,
    KEYVAULT_SEAL_PUBLIC_KEY: busKeys().sealPublic,
    // billing-chain seals the keeper key it generates under this key (its alone, as deploy/start.sh's billing-data-key).
    BILLING_DATA_KEY: randomBytes(32).toString('base64'),
    ...(chain ? { SOLANA_RPC_URL: chain.url, SUBSCRIPTION_PROGRAM_ID: chain.programId, TREASURY: chain.treasury } : {}),
    // Suites sign in many users from one address (127.0.0.1); the sign-in limits have their own suite
    // (services/gateway/test/sign-in-limits.test.ts), which sets small ones.
    NONCES_PER_ADDRESS: '100000',
    LOGINS_PER_ADDRESS: '100000',
    NONCES_PER_WALLET: '100000',
    LOGINS_PER_WALLET: '100000',
    ...opts.env,
  };
  // Each process gets only its own NATS identity, its own database role (env may still override them)
  // and only its own secrets: the master key and the seal key go to keyvault alone, the signing key to auth
  // alone, the assertion key to the gateway alone, the data key to billing-chain alone.
  const envFor = (name: ServiceName | 'gateway', extra: Record<string, string> = {}) => {
    const { MASTER_KEY_ENCRYPTION, AUTH_JWT_PRIVATE_KEY, GATEWAY_ASSERTION_PRIVATE_KEY, KEYVAULT_SEAL_PRIVATE_KEY, BILLING_DATA_KEY, ...shared } = env;
    return {
      ...nats.envFor(name),
      DATABASE_URL: db.urlFor(name),
      ...shared,
      ...(name === 'keyvault' && MASTER_KEY_ENCRYPTION ? { MASTER_KEY_ENCRYPTION } : {}),
      ...(name === 'keyvault' && KEYVAULT_SEAL_PRIVATE_KEY ? { KEYVAULT_SEAL_PRIVATE_KEY } : {}),
      ...(name === 'gateway' && GATEWAY_ASSERTION_PRIVATE_KEY ? { GATEWAY_ASSERTION_PRIVATE_KEY } : {}),
      ...(name === 'auth' && AUTH_JWT_PRIVATE_KEY ? { AUTH_JWT_PRIVATE_KEY } : {}),
      ...(name === 'billing-chain' && BILLING_DATA_KEY ? { BILLING_DATA_KEY } : {}),
      ...opts.serviceEnv?.[name],
      ...extra,
    };
  };
  const services = new Map<ServiceName, ServiceProcess>();
  const started: ServiceProcess[] = [];
  try {
    // The gateways start with the others, as in a deployment (they need only NATS and their database; the token
    // deny-list they load from auth is asked again until auth answers): a suite waits for the slowest, not the sum.
    const gateways: ServiceProcess[] = [];
    await Promise.all([
      ...opts.services.map(async (name) => {
        const p = await spawnService(name, { env: envFor(name) });
        services.set(name, p);
        started.push(p);
      }),
      ...Array.from({ length: opts.gateways ?? 1 }, async (_, i) => {
        const port = i === 0 ? String(gatewayPort) : '0';
        const g = await spawnService('gateway', {
          env: envFor('gateway', { GATEWAY_HOST: '127.0.0.1', ...opts.serviceEnv?.gateway, GATEWAY_PORT: port }),
          label: `gateway${i}`,
        });
        gateways[i] = g;
        started.push(g);
      }),
    ]);
    const baseUrl = `${String(gateways[0]!.ready.url)}/api`;
    return {
      nats,
      db,
      env,
      envFor: (name) => envFor(name),
      services,
      gateways,
      baseUrl,
      api: apiClient(baseUrl),
      ...(chain ? { chain } : {}),
      async addReplica(name, label) {
        const extra: Record<string, string> =
          name === 'gateway' ? { GATEWAY_HOST: '127.0.0.1', ...opts.serviceEnv?.gateway, GATEWAY_PORT: '0' } : { INSTANCE_NAME: label };
        const p = await spawnService(name, { env: envFor(name, extra), label });
        started.push(p);
        if (name === 'gateway') gateways.push(p);
        return p;
      },
      async stop() {
        await Promise.all(started.map((p) => p.stop()));
        await chain?.close();
        await nats.stop();
        await db.drop().catch(() => {});
      },
    };
  } catch (err) {
    await Promise.all(started.map((p) => p.kill()));
    await chain?.close();
    await nats.stop();
    await db.drop().catch(() => {});
    throw err;
  }
}

export const gatewayUrl = (g: ServiceProcess): string => `${String(g.ready.url)}/api`;

/** A devchain in this process on a free port (loaded only by stacks that ask for one). */
async function startChain(options: DevchainOptions): Promise<StackChain> {
  const { startDevchain } = await import('@agenthost/devchain');
  const dc = await startDevchain({ ...options, host: '127.0.0.1', port: 0 });
  return {
    url: dc.url,
    programId: dc.config.programId,
    treasury: dc.config.treasury,
    prices: { ...dc.config.prices },
    advanceClock: async (seconds) => dc.advanceClock(seconds),
    now: async () => dc.now(),
    close: () => dc.close(),
  };
}
