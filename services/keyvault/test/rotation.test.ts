import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { NatsConnection } from 'nats';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openKey } from '@agenthost/instance-bootstrap/crypto';
import {
  recordSecret,
  repoRoot,
  signIn,
  spawnService,
  startStack,
  testLogDir,
  type ServiceProcess,
  type Session,
  type Stack,
  activeSubscriptions,
} from '@agenthost/testkit';
import { issue, keyvaultDb, nextIp, retrieve, secretValue } from './helpers.ts';

let stack: Stack;
let nc: NatsConnection;
let billing: { stop(): Promise<void> };
let db: pg.Client;
let alice: Session;
let running: ServiceProcess | undefined;

const k1 = () => stack.env.MASTER_KEY_ENCRYPTION!;
const k2 = randomBytes(32).toString('base64');
recordSecret(k2);
const rotatedEnv = () => ({ MASTER_KEY_ID: 'k2', MASTER_KEY_ENCRYPTION: k2, MASTER_KEYS_PREVIOUS: JSON.stringify({ k1: k1() }) });

/** Replace the running keyvault with one started with other keyring settings. */
async function restartKeyvault(env: Record<string, string>, label: string): Promise<void> {
  if (running) await running.stop();
  else await stack.services.get('keyvault')!.stop();
  running = await spawnService('keyvault', { env: { ...stack.envFor('keyvault'), ...env }, label });
}

async function reseal(env: Record<string, string>): Promise<Record<string, any>> {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [path.join(repoRoot, 'services/keyvault/src/reseal.ts')], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', ...stack.envFor('keyvault'), ...env },
  });
  mkdirSync(path.join(testLogDir, 'main'), { recursive: true });
  appendFileSync(path.join(testLogDir, 'main', `keyvault-reseal-${process.pid}.log`), stdout + stderr);
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}

const kids = async (instanceId: string): Promise<Record<string, string>> =>
  Object.fromEntries((await db.query('select key_name, kid from api_keys where instance_id = $1', [instanceId])).rows.map((r) => [r.key_name, r.kid]));

beforeAll(async () => {
  stack = await startStack({ services: ['auth', 'keyvault'] });
  recordSecret(k1());
  nc = await stack.nats.connect();
  billing = await activeSubscriptions(stack.nats);
  db = await keyvaultDb(stack);
  alice = await signIn(stack.api);
});
afterAll(async () => {
  await running?.stop();
  await db?.end();
  await billing?.stop();
  await nc?.drain();
  await stack?.stop();
});

describe('master key rotation', () => {
  it('keeps old and new keys readable after rotation, re-seals everything under the new key while serving, and retires the old key', async () => {
    const x = await issue(nc, alice.user_id);
    const values: Record<string, string> = { A_OLD: secretValue(), B_OLD: secretValue() };
    expect((await alice.api.post('/keys/store', { instance_id: x.instance_id, keys: values })).status).toBe(200);
    expect(await kids(x.instance_id)).toEqual({ A_OLD: 'k1', B_OLD: 'k1' });

    // Rotate: k2 seals, k1 still opens.
    await restartKeyvault(rotatedEnv(), 'keyvault-k2');
    values.C_NEW = secretValue();
    expect((await alice.api.post('/keys/store', { instance_id: x.instance_id, keys: { C_NEW: values.C_NEW } })).status).toBe(200);
    expect(await kids(x.instance_id)).toEqual({ A_OLD: 'k1', B_OLD: 'k1', C_NEW: 'k2' });

    // The running instance still holds its k1-derived key: everything comes back sealed for k1.
    const openAll = async (inst: { instance_id: string; instance_secret: string; instance_key: string }, kid: string) => {
      const res = await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
      expect(res.status).toBe(200);
      const out: Record<string, string> = {};
      for (const [name, sealed] of Object.entries(res.body.keys as Record<string, string>)) {
        expect(JSON.parse(sealed).kid).toBe(kid);
        out[name] = openKey({ instanceKey: inst.instance_key, instanceId: inst.instance_id, keyName: name, sealed });
      }
      return out;
    };
    expect(await openAll(x, 'k1')).toEqual(values);

    // A container created now gets k2 credentials and opens old and new keys.
    const y = await issue(nc, alice.user_id);
    expect(y.key_id).toBe('k2');
    const yValue = secretValue();
    await alice.api.post('/keys/store', { instance_id: y.instance_id, keys: { Y_KEY: yValue } });

    // Re-seal while owners keep updating a key.
    let updating = true;
    let last = values.A_OLD!;
    const updates = (async () => {
      while (updating) {
        const v = secretValue();
        const r = await alice.api.put('/keys/update', { instance_id: x.instance_id, key_name: 'A_OLD', key_value: v });
        expect(r.status).toBe(200);
        last = v;
      }
    })();
    const first = await reseal(rotatedEnv());
    updating = false;
    await updates;
    values.A_OLD = last;
    expect(first.failed).toBe(0);
    expect(first.resealed).toBeGreaterThanOrEqual(1);
    expect(first.keys_by_key_id).toEqual({ k2: 4 });
    expect(first.instances_by_key_id).toEqual({ k1: 1, k2: 1 });
    expect(await kids(x.instance_id)).toEqual({ A_OLD: 'k2', B_OLD: 'k2', C_NEW: 'k2' });

    // Idempotent.
    const second = await reseal(rotatedEnv());
    expect(second).toMatchObject({ resealed: 0, failed: 0, keys_by_key_id: { k2: 4 } });

    expect(await openAll(x, 'k1')).toEqual(values);
    expect(await openAll(y, 'k2')).toEqual({ Y_KEY: yValue });

    // Retire k1: an instance still holding k1 credentials is told to restart; fresh credentials work.
    await restartKeyvault({ MASTER_KEY_ID: 'k2', MASTER_KEY_ENCRYPTION: k2 }, 'keyvault-k2-only');
    const stale = await retrieve(stack, x.instance_id, x.instance_secret, nextIp());
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe('INSTANCE_CREDENTIALS_STALE');
    const x2 = await issue(nc, alice.user_id, x.instance_id);
    expect(x2.key_id).toBe('k2');
    expect(await openAll(x2, 'k2')).toEqual(values);
  });
});
