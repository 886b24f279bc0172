import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The server the test run started (deploy/test.sh sets TEST_DATABASE_URL to its admin database). */
export const adminUrl = process.env.TEST_DATABASE_URL ?? 'postgres://agenthost@127.0.0.1:5432/postgres';

/** Each service's schema: the one its own database role owns. */
export const SERVICE_SCHEMAS = { gateway: 'gateway', auth: 'auth', 'billing-chain': 'billing', provisioner: 'provisioner', keyvault: 'keyvault' } as const;
export type SchemaService = keyof typeof SERVICE_SCHEMAS;

export interface TestDatabase {
  /** The admin's URL of this database (tests inspect every schema with it; no service gets it). */
  url: string;
  name: string;
  /** The URL of a service's own role, as deploy gives it: it owns its schema and may touch no other. */
  urlFor(service: SchemaService): string;
  drop(): Promise<void>;
}

async function asAdmin(database: string, statements: string[]): Promise<void> {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  try {
    for (const s of statements) await c.query(s);
  } finally {
    await c.end();
  }
}

/**
 * A fresh database for one suite (suites never see each other's rows), set up as deploy sets up the
 * real one: one login role per service owning its schema, no rights for anyone on the others.
 */
export async function createDatabase(prefix = 't'): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`.toLowerCase();
  const roles = Object.values(SERVICE_SCHEMAS).map((schema) => ({ schema, role: `${name}_${schema}`, password: randomBytes(18).toString('base64url') }));
  await asAdmin('postgres', [`create database ${name}`]);
  await asAdmin(name, [
    `revoke all on database ${name} from public`,
    ...roles.flatMap((r) => [
      `create role ${r.role} login password '${r.password}'`,
      `grant connect on database ${name} to ${r.role}`,
      `create schema ${r.schema} authorization ${r.role}`,
    ]),
  ]);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    urlFor(service) {
      const r = roles.find((x) => x.schema === SERVICE_SCHEMAS[service])!;
      const u = new URL(url);
      u.username = r.role;
      u.password = r.password;
      return u.toString();
    },
    async drop() {
      await asAdmin('postgres', [`drop database if exists ${name} with (force)`, ...roles.map((r) => `drop role if exists ${r.role}`)]);
    },
  };
}
