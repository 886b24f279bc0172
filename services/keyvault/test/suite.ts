import type { NatsConnection } from 'nats';
import type pg from 'pg';
import { expect } from 'vitest';
import { recordSecret, signIn, startStack, type Session, type Stack, activeSubscriptions } from '@agenthost/testkit';
import { keyvaultDb, secretValue, waitFor } from './helpers.ts';

/** What a keyvault test file runs against: its own stack, two signed-in users and a direct look at the tables. */
export interface KeyvaultSuite {
  stack: Stack;
  nc: NatsConnection;
  db: pg.Client;
  alice: Session;
  bob: Session;
  /** Every plaintext value the file stored, for the check that none of them reached a log line. */
  values: string[];
  /** A new plaintext key value, remembered in `values`. */
  remember(label?: string): string;
  stop(): Promise<void>;
}

export async function startKeyvaultSuite(): Promise<KeyvaultSuite> {
  const stack = await startStack({
    services: ['auth', 'keyvault'],
    serviceEnv: {
      keyvault: {
        INSTANCE_AUTH_MAX_FAILURES_PER_IP: '5',
        INSTANCE_AUTH_MAX_FAILURES_PER_INSTANCE: '8',
        INSTANCE_AUTH_WINDOW_SECONDS: '120',
      },
      // The tests stand in for a proxy on this host, which tells the client's address in X-Forwarded-For.
      gateway: { TRUSTED_PROXIES: '127.0.0.1,::1' },
    },
  });
  recordSecret(stack.env.MASTER_KEY_ENCRYPTION!);
  const nc = await stack.nats.connect();
  const billing = await activeSubscriptions(stack.nats);
  const db = await keyvaultDb(stack);
  const values: string[] = [];
  return {
    stack,
    nc,
    db,
    alice: await signIn(stack.api),
    bob: await signIn(stack.api),
    values,
    remember(label) {
      const v = secretValue(label);
      values.push(v);
      return v;
    },
    async stop() {
      await db.end();
      await billing.stop();
      await nc.drain();
      await stack.stop();
    },
  };
}

/**
 * Waits for `marker` to show in the stack's logs (they arrive through a pipe, possibly after the reply), then checks
 * that none of `secrets` is in any line. Returns the logs for further checks.
 */
export async function expectNotLogged(stack: Stack, marker: string, secrets: string[]): Promise<string> {
  const lines = () => [...stack.services.values(), ...stack.gateways].flatMap((p) => p.lines()).join('\n');
  const all = await waitFor(`the log line ${marker}`, async () => (lines().includes(marker) ? lines() : undefined));
  for (const s of [...secrets, stack.env.MASTER_KEY_ENCRYPTION!]) expect(all).not.toContain(s);
  return all;
}
