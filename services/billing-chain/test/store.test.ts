import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { connect } from '@agenthost/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type TestDatabase } from '@agenthost/testkit';
import type { BillingDB } from '../src/db/schema.ts';
import { migrations } from '../src/db/migrations/index.ts';
import { storeSubscription } from '../src/domain/subscriptions.ts';

// The cached record of a new wallet is written by whichever gets there first: its register, the chain pick-up of its
// payment, a refresh, on any replica. Written at the same moment, each must store it; none may fail (a failed
// register answered a paying user's new wallet TX_ALREADY_USED in a swarm run).

let database: TestDatabase;
let db: Kysely<BillingDB>;

beforeAll(async () => {
  database = await createDatabase('store');
  db = await connect<BillingDB>({ url: database.urlFor('billing-chain'), schema: 'billing', migrations: migrations(undefined), poolSize: 12 });
});
afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

describe('the cached subscription record', () => {
  it('is stored by three writers of the same new wallet at once, every time, as one row', async () => {
    const WALLETS = 600;
    const failures: string[] = [];
    for (let i = 0; i < WALLETS; i++) {
      const wallet = randomBytes(32).toString('hex');
      const account = { wallet, pda: `pda-${wallet}`, tier: 1, expiresAt: 2_000_000_000, isActive: true, lamports: 1 };
      const writes = await Promise.allSettled(
        [null, 'a2b0c1a8-7d3e-4a6f-9a51-6c2d1e0f9b11', null].map((user_id) =>
          storeSubscription(db, account, { user_id, cancelled: false, refreshed_at: new Date() }),
        ),
      );
      for (const w of writes) if (w.status === 'rejected') failures.push(String((w.reason as Error).message));
    }
    expect(failures).toEqual([]);
    const rows = await db
      .selectFrom('subscriptions')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(rows.n)).toBe(WALLETS);
    // The writer that named the user is kept whichever wrote last.
    const unowned = await db.selectFrom('subscriptions').select('wallet_address').where('user_id', 'is', null).execute();
    expect(unowned).toEqual([]);
  }, 120_000);
});
