import bs58 from 'bs58';
import type { Keypair } from '@solana/web3.js';
import type { Kysely } from 'kysely';
import { contracts, endpoint, keepEventStream, listen, loadConfig, publishEvent, retry, runService, type Logger } from '@agenthost/shared';
import { billingConfig, type BillingConfig } from './config.ts';
import type { BillingDB } from './db/schema.ts';
import { migrations } from './db/migrations/index.ts';
import { ChainClient, parseSecretKey } from './domain/chain.ts';
import { Jobs } from './domain/jobs.ts';
import { billingDataKey, generatedKeeperKey, KeeperKeyError } from './domain/keeper-key.ts';
import { Subscriptions } from './domain/subscriptions.ts';

// The data key is needed before the schema is migrated (a keeper key kept in clear by an older version is sealed then).
const dataKey = billingDataKey(loadConfig(billingConfig));

await runService<typeof billingConfig, BillingDB>({
  name: 'billing-chain',
  version: '1.0.0',
  config: billingConfig,
  db: { schema: 'billing', migrations: migrations(dataKey) },
  async build({ config, db, log, nc }) {
    const program = await programConfig(config, log);
    const chain = new ChainClient({
      url: config.SOLANA_RPC_URL,
      programId: program.programId,
      treasury: program.treasury,
      commitment: config.SOLANA_COMMITMENT,
      timeoutMs: config.RPC_TIMEOUT_MS,
      log,
    });
    await chain.now().catch(() => {});
    await keepEventStream(nc, { replicas: config.NATS_STREAM_REPLICAS }, log);
    const subs = new Subscriptions({
      db,
      chain,
      log,
      ttlMs: config.SUBSCRIPTION_CACHE_TTL_SECONDS * 1000,
      publish: async (payload, msgId) => {
        try {
          // Best effort inside a request (a register, a refresh): bounded to half the caller's timeout, so a slow
          // JetStream costs this announcement, never the caller's answer (it waited 5 s, the gateway's whole timeout).
          await publishEvent(nc, contracts.billing.subscriptionChanged, payload, msgId, { timeoutMs: Math.floor(config.NATS_REQUEST_TIMEOUT_MS / 2) });
        } catch (err) {
          log.error({ err, wallet_address: payload.wallet_address, reason: payload.reason }, 'could not publish events.subscription.changed');
        }
      },
    });
    // Changes announced by any replica (this one included) drop the in-memory copy of that wallet.
    const changes = listen(nc, contracts.billing.subscriptionChanged, (ev) => subs.forget(ev.wallet_address), log);
    const keeper = await keeperKey(config, db, log);
    const jobs = new Jobs({
      db,
      chain,
      subs,
      keeper,
      log,
      intervalMs: config.POLL_INTERVAL_SECONDS * 1000,
      airdrop: config.KEEPER_AIRDROP,
      expiring: (payload, msgId) => publishEvent(nc, contracts.billing.subscriptionExpiring, payload, msgId),
    });
    log.info(
      {
        rpc: config.SOLANA_RPC_URL,
        program_id: program.programId,
        treasury: program.treasury,
        keeper: keeper.publicKey.toBase58(),
        commitment: config.SOLANA_COMMITMENT,
      },
      'chain configured',
    );
    return {
      endpoints: [
        endpoint(contracts.billing.register, (input) => subs.register(input)),
        // Only an asserted user id is recorded: the provisioner reads the (public) record without one.
        endpoint(contracts.billing.status, (input, { assertedUser }) => subs.status({ wallet_address: input.wallet_address, user_id: assertedUser })),
        endpoint(contracts.billing.refresh, (input) => subs.refresh(input)),
      ],
      async start() {
        if (config.BACKGROUND_JOBS) jobs.start();
      },
      async stop() {
        changes.unsubscribe();
        await jobs.stop();
      },
    };
  },
});

/** Program id and treasury from config, else from devchain (devchain_getConfig), retried while it starts. */
async function programConfig(config: BillingConfig, log: Logger): Promise<{ programId: string; treasury: string }> {
  if (config.SUBSCRIPTION_PROGRAM_ID && config.TREASURY) return { programId: config.SUBSCRIPTION_PROGRAM_ID, treasury: config.TREASURY };
  const ask = async () => {
    const res = await fetch(config.SOLANA_RPC_URL, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'devchain_getConfig', params: [] }),
      signal: AbortSignal.timeout(2000),
    });
    const body = (await res.json()) as { result?: { programId: string; treasury: string } };
    if (!body.result) throw new Error('the RPC is not a devchain');
    return body.result;
  };
  try {
    const published = await retry(ask, { delayMs: 500, until: Date.now() + 15_000 });
    log.warn('SUBSCRIPTION_PROGRAM_ID/TREASURY not set: using the ones devchain publishes');
    return { programId: config.SUBSCRIPTION_PROGRAM_ID || published.programId, treasury: config.TREASURY || published.treasury };
  } catch (err) {
    process.stderr.write(`invalid configuration:\n  - SUBSCRIPTION_PROGRAM_ID and TREASURY must be set (could not ask devchain: ${(err as Error).message})\n`);
    process.exit(2);
  }
}

/** KEEPER_SECRET_KEY, else a development key generated once and shared by all replicas through the billing schema. */
async function keeperKey(config: BillingConfig, db: Kysely<BillingDB>, log: Logger): Promise<Keypair> {
  if (config.KEEPER_SECRET_KEY) return parseSecretKey(config.KEEPER_SECRET_KEY, (s) => bs58.decode(s));
  log.warn('KEEPER_SECRET_KEY is not set: using the generated development keeper key');
  try {
    return await generatedKeeperKey(db, dataKey);
  } catch (err) {
    if (!(err instanceof KeeperKeyError)) throw err;
    process.stderr.write(`invalid configuration:\n  - ${err.message}\n`);
    process.exit(2);
  }
}
