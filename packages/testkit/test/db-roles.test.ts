import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../src/index.ts';

// Each service connects with a role of its own that owns its schema and has no rights on any other:
// a compromised billing-chain (the one service that talks to an outside RPC) cannot read keyvault's rows.

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ services: ['keyvault', 'billing-chain'], devchain: true });
});
afterAll(async () => {
  await stack?.stop();
});

async function as<T>(service: 'billing-chain' | 'keyvault' | 'gateway', run: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: stack.db.urlFor(service) });
  await c.connect();
  try {
    return await run(c);
  } finally {
    await c.end();
  }
}

const refusal = (c: pg.Client, sql: string) =>
  c.query(sql).then(
    () => undefined,
    (err: { code?: string }) => err.code,
  );

describe('database roles', () => {
  it("billing-chain's role cannot read, change or create anything in keyvault's schema", async () => {
    await as('billing-chain', async (c) => {
      // 42501: insufficient_privilege.
      expect(await refusal(c, 'select * from keyvault.api_keys')).toBe('42501');
      expect(await refusal(c, 'select * from keyvault.instances')).toBe('42501');
      expect(await refusal(c, 'delete from keyvault.audit_log where true')).toBe('42501');
      expect(await refusal(c, 'create table keyvault.planted (x int)')).toBe('42501');
      expect(await refusal(c, 'create schema planted')).toBe('42501');
      // Its own schema is its own.
      expect(await refusal(c, 'select count(*) from billing.subscriptions')).toBeUndefined();
    });
  });

  it("keyvault's role owns keyvault's tables and cannot read billing's", async () => {
    await as('keyvault', async (c) => {
      const owners = await c.query("select distinct tableowner from pg_tables where schemaname = 'keyvault'");
      expect(owners.rows.map((r: { tableowner: string }) => r.tableowner)).toEqual([`${stack.db.name}_keyvault`]);
      expect(await refusal(c, 'select * from billing.subscriptions')).toBe('42501');
    });
  });

  it('no service role is a superuser or may create roles or databases', async () => {
    const admin = new pg.Client({ connectionString: stack.db.url });
    await admin.connect();
    try {
      const r = await admin.query('select rolname, rolsuper, rolcreaterole, rolcreatedb from pg_roles where rolname like $1', [`${stack.db.name}_%`]);
      expect(r.rows).toHaveLength(5);
      for (const row of r.rows as Array<{ rolsuper: boolean; rolcreaterole: boolean; rolcreatedb: boolean }>)
        expect(row).toMatchObject({ rolsuper: false, rolcreaterole: false, rolcreatedb: false });
    } finally {
      await admin.end();
    }
  });
});
