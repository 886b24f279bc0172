import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSigningKeyPem, repoRoot, signIn, startStack, type Stack } from '@agenthost/testkit';

// auth's signing key lives in a file only auth reads (or its environment), never in a table.

const dir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-authkey-'));
const keyFile = path.join(dir, 'auth-jwt.pem');
let stack: Stack;

beforeAll(async () => {
  const pem = newSigningKeyPem();
  writeFileSync(keyFile, pem, { mode: 0o600 });
  chmodSync(dir, 0o700);
  stack = await startStack({ services: ['auth'], serviceEnv: { auth: { AUTH_JWT_PRIVATE_KEY: '', AUTH_JWT_PRIVATE_KEY_FILE: keyFile } } });
});
afterAll(async () => {
  await stack?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("auth's signing key", () => {
  it('signs with the key from its file and keeps no private key in the database', async () => {
    const session = await signIn(stack.api);
    expect(decodeProtectedHeader(session.token).kid).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect((await session.api.get('/auth/me')).status).toBe(200);
    const { stdout } = await promisify(execFile)('psql', [
      stack.db.url,
      '-tAc',
      "select table_name || '.' || column_name from information_schema.columns where table_schema = 'auth'",
    ]);
    expect(stdout).toMatch(/^users\./m);
    expect(stdout).not.toMatch(/signing_keys|private_pem/);
  });

  it('refuses to start without a signing key, saying which setting is missing', async () => {
    const run = promisify(execFile);
    const out = await run(process.execPath, [path.join(repoRoot, 'services/auth/src/main.ts')], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', NATS_URL: 'nats://127.0.0.1:1' },
      timeout: 15_000,
    }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/AUTH_JWT_PRIVATE_KEY_FILE: AUTH_JWT_PRIVATE_KEY_FILE \(or AUTH_JWT_PRIVATE_KEY\) is required/);
  });
});
