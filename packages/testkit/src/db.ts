import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The server the test run started (deploy/test.sh sets TEST_DATABASE_URL to its admin database). */
export const adminUrl = process.env.TEST_DATABASE_URL ?? 'postgres://agenthost@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh database for one suite: suites never see each other's rows. */
export async function createDatabase(prefix = 't'): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`.toLowerCase();
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}
