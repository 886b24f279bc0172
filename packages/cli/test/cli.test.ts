import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, startStack, type Stack } from '@agenthost/testkit';

const exec = promisify(execFile);
let stack: Stack;
let home: string;

beforeAll(async () => {
  stack = await startStack({ services: ['auth', 'billing-chain'], devchain: true });
  home = mkdtempSync(path.join(os.tmpdir(), 'agenthost-cli-'));
});
afterAll(async () => {
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [path.join(repoRoot, 'packages/cli/src/main.ts'), ...args], {
      env: { PATH: process.env.PATH ?? '', AGENTHOST_HOME: home, AGENTHOST_API_URL: stack.baseUrl, SOLANA_RPC_URL: stack.chain!.url },
      timeout: 60_000,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('agenthost CLI', () => {
  it('walks a newcomer from a new wallet to an active pro subscription', async () => {
    const created = await cli('wallet', 'create');
    expect(created.code).toBe(0);
    expect(statSync(path.join(home, 'wallet.json')).mode & 0o777).toBe(0o600);
    const address = (await cli('wallet', 'show')).stdout.trim();
    expect(address).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);

    expect((await cli('airdrop', '2')).stdout).toMatch(/balance: 2 SOL/);
    const login = await cli('login');
    expect(login.code).toBe(0);
    expect(login.stdout).toContain(`signed in as ${address}`);

    const sub = await cli('subscribe', 'pro');
    expect(sub.code).toBe(0);
    expect(sub.stdout).toMatch(/"tx_verified": true/);

    const status = await cli('call', 'GET', '/subscription/status');
    expect(status.code).toBe(0);
    const body = JSON.parse(status.stdout);
    expect(body).toMatchObject({ wallet_address: address, tier: 'pro', is_active: true, instances_limit: 5 });
  });

  it('explains what is missing instead of failing obscurely', async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'agenthost-cli-empty-'));
    try {
      const r: { code?: number; stderr: string } = await exec(process.execPath, [path.join(repoRoot, 'packages/cli/src/main.ts'), 'login'], {
        env: { PATH: process.env.PATH ?? '', AGENTHOST_HOME: empty, AGENTHOST_API_URL: stack.baseUrl },
      }).catch((e: { code: number; stderr: string }) => e);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no wallet yet: run `agenthost wallet create`/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
    const usage = await cli('frobnicate');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/agenthost wallet create/);
  });

  it('exits non-zero and prints the error body when the API refuses a call', async () => {
    const r = await cli('call', 'GET', '/instance/status/no-such-instance');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: expect.any(Number), code: expect.any(String) });
  });
});
