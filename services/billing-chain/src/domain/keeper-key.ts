// The keeper's Solana secret key, when billing-chain generates it (KEEPER_SECRET_KEY unset), is kept in the billing
// schema sealed under a key billing-chain alone holds, so whoever reads the schema (a dump, a backup, the database's
// admin) cannot spend the keeper's funds. The key: BILLING_DATA_KEY (deploy/start.sh gives billing-chain the path of a
// file only its user reads), else one derived from billing-chain's NATS identity seed (the swarm), which is its alone too.
import { hkdfSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Keypair } from '@solana/web3.js';
import bs58 from 'bs58';
import type { Kysely } from 'kysely';
import { atRestKey, openAtRest, sealAtRest } from '@agenthost/shared';
import type { BillingDB } from '../db/schema.ts';

/** The key that seals the keeper key; undefined when billing-chain has neither setting. */
export function billingDataKey(config: { BILLING_DATA_KEY: string; NATS_NKEY_SEED_FILE?: string | undefined }): Buffer | undefined {
  if (config.BILLING_DATA_KEY) {
    const k = atRestKey(config.BILLING_DATA_KEY);
    if ('key' in k) return k.key;
  }
  if (!config.NATS_NKEY_SEED_FILE) return undefined;
  const seed = readFileSync(config.NATS_NKEY_SEED_FILE, 'utf8').trim();
  return Buffer.from(hkdfSync('sha256', seed, 'agenthost billing', 'billing data key v1', 32));
}

/** Bound to its row: a sealed value copied elsewhere does not open. */
const rowAad = (id: number) => `agenthost:billing:keeper_keys:${id}`;

/** The base58 secret key, sealed for row `id`. */
export const sealKeeperKey = (key: Buffer, id: number, secret: string): string => sealAtRest(key, secret, rowAad(id));

export class KeeperKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeeperKeyError';
  }
}

/** The base58 secret key of row `id`; a KeeperKeyError when it was sealed under another key. */
export function openKeeperKey(key: Buffer, id: number, sealed: string): string {
  try {
    return openAtRest(key, sealed, rowAad(id));
  } catch {
    throw new KeeperKeyError('the keeper key in billing.keeper_keys does not open with this BILLING_DATA_KEY: give billing-chain the key it was sealed under');
  }
}

/** The development keeper key: generated once and shared by all replicas through the billing schema, sealed. */
export async function generatedKeeperKey(db: Kysely<BillingDB>, key: Buffer | undefined): Promise<Keypair> {
  if (!key) throw new KeeperKeyError('KEEPER_SECRET_KEY is not set and there is no key to seal a generated one: set BILLING_DATA_KEY(_FILE)');
  const fresh = Keypair.generate();
  await db
    .insertInto('keeper_keys')
    .values({ id: 1, sealed_key: sealKeeperKey(key, 1, bs58.encode(fresh.secretKey)) })
    .onConflict((c) => c.doNothing())
    .execute();
  const row = await db.selectFrom('keeper_keys').select('sealed_key').where('id', '=', 1).executeTakeFirstOrThrow();
  return Keypair.fromSecretKey(bs58.decode(openKeeperKey(key, 1, row.sealed_key)));
}
