import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { busKeys, recordSecret, repoRoot, testLogDir } from '@agenthost/testkit';

/** Start keyvault with the given environment and collect its exit code and output (it must exit before connecting anywhere). */
function startKeyvault(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(repoRoot, 'services/keyvault/src/main.ts')], {
      cwd: repoRoot,
      // Unreachable servers: a valid config would hang trying to connect, which the timeout would catch.
      // A valid seal key, so each test's output is about the master keys only.
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
        NATS_URL: 'nats://127.0.0.1:1',
        KEYVAULT_SEAL_PRIVATE_KEY: busKeys().sealPem,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`keyvault did not exit; output:\n${output}`));
    }, 15_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      // Kept with the other logs so the scan after the run checks this output too.
      mkdirSync(path.join(testLogDir, 'main'), { recursive: true });
      appendFileSync(path.join(testLogDir, 'main', `keyvault-config-${process.pid}.log`), output);
      resolve({ code, output });
    });
  });
}

describe('master key configuration', () => {
  it('refuses to start without MASTER_KEY_ENCRYPTION', async () => {
    const { code, output } = await startKeyvault({});
    expect(code).not.toBe(0);
    expect(output).toMatch(/invalid configuration:\n {2}- MASTER_KEY_ENCRYPTION: is required: base64 of 32 random bytes/);
  });

  it('refuses to start with a master key that is not base64', async () => {
    const bad = `${randomBytes(30).toString('hex')}!!`;
    recordSecret(bad);
    const { code, output } = await startKeyvault({ MASTER_KEY_ENCRYPTION: bad });
    expect(code).not.toBe(0);
    expect(output).toContain('MASTER_KEY_ENCRYPTION: is not valid base64');
    expect(output).not.toContain(bad);
  });

  it('refuses to start with a 31-byte master key', async () => {
    const short = randomBytes(31).toString('base64');
    recordSecret(short);
    const { code, output } = await startKeyvault({ MASTER_KEY_ENCRYPTION: short });
    expect(code).not.toBe(0);
    expect(output).toContain('MASTER_KEY_ENCRYPTION: must decode to 32 bytes, got 31');
    expect(output).not.toContain(short);
  });

  it('prints every problem at once, including bad previous keys, without echoing any key', async () => {
    const prevShort = randomBytes(16).toString('base64');
    recordSecret(prevShort);
    const { code, output } = await startKeyvault({
      MASTER_KEY_ENCRYPTION: '',
      MASTER_KEY_ID: 'bad id!',
      MASTER_KEYS_PREVIOUS: JSON.stringify({ k0: prevShort }),
    });
    expect(code).not.toBe(0);
    expect(output).toContain('MASTER_KEY_ENCRYPTION: is empty');
    expect(output).toContain('MASTER_KEY_ID: must be 1-32 letters');
    expect(output).toContain('MASTER_KEYS_PREVIOUS: key "k0" must decode to 32 bytes, got 16');
    expect(output).not.toContain(prevShort);
  });

  it('refuses MASTER_KEYS_PREVIOUS that is not JSON or reuses the current id', async () => {
    const cur = randomBytes(32).toString('base64');
    recordSecret(cur);
    const notJson = await startKeyvault({ MASTER_KEY_ENCRYPTION: cur, MASTER_KEYS_PREVIOUS: `{k1:${cur}` });
    expect(notJson.code).not.toBe(0);
    expect(notJson.output).toContain('MASTER_KEYS_PREVIOUS: must be a JSON object');
    expect(notJson.output).not.toContain(cur);
    const other = randomBytes(32).toString('base64');
    recordSecret(other);
    const dup = await startKeyvault({ MASTER_KEY_ENCRYPTION: cur, MASTER_KEYS_PREVIOUS: JSON.stringify({ k1: other }) });
    expect(dup.code).not.toBe(0);
    expect(dup.output).toContain('MASTER_KEYS_PREVIOUS: must not contain the current key id "k1"');
    expect(dup.output).not.toContain(other);
  });
});
