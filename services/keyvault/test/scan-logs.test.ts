import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { repoRoot } from '@agenthost/testkit';

// The scan runs here against a private directory (never the real .test-logs, whose secrets other
// suites are still writing), with secrets made up for this test only.
let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function scan(files: Record<string, string>, secrets: string[]) {
  dir = mkdtempSync(path.join(os.tmpdir(), 'scan-logs-'));
  const logs = path.join(dir, 'test-logs');
  mkdirSync(path.join(logs, 'secrets'), { recursive: true });
  writeFileSync(path.join(logs, 'secrets', '1.txt'), secrets.map((s) => `${s}\n`).join(''));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'deploy/scan-logs.ts')], {
    env: {
      PATH: process.env.PATH ?? '',
      AGENTHOST_TEST_LOG_DIR: logs,
      AGENTHOST_STATE: path.join(dir, 'state'),
      AGENTHOST_DOCKER_ROOT: path.join(dir, 'docker'),
    },
    encoding: 'utf8',
  });
  return { code: r.status, out: r.stdout + r.stderr, secretsLeft: existsSync(path.join(logs, 'secrets')) };
}

describe('log scan after the test run', () => {
  it('reports a clean run and deletes the recorded secrets', () => {
    const s = `sk-${randomBytes(16).toString('hex')}`;
    const r = scan({ 'test-logs/w1/a.log': '{"msg":"hello","hint":"…abcd"}\n', 'state/log/nats.log': 'ok\n' }, [s, 'short']);
    expect(r.code).toBe(0);
    expect(r.out).toBe('log scan: 2 files, 1 secrets, 0 leaks\n');
    expect(r.secretsLeft).toBe(false);
  });

  it('lists file and line of each leak, in raw, JSON-escaped or URL-encoded form, without printing the secret, and exits 1', () => {
    const raw = `sk-${randomBytes(16).toString('hex')}`;
    const quoted = `pa"ss\\word-${randomBytes(8).toString('hex')}`;
    const spaced = `with space/${randomBytes(8).toString('hex')}`;
    const r = scan(
      {
        'test-logs/w1/gateway.log': `line one\n{"value":"${raw}"}\nline three\n`,
        'test-logs/w2/keyvault.log': `ok\nok\n${JSON.stringify({ v: quoted })}\n`,
        'state/log/gateway.log': `GET /x?k=${encodeURIComponent(spaced)}\n`,
        'docker/containers/abc/abc-json.log': `{"log":"${raw}"}\n`,
        'docker/containers/abc/config.v2.json': raw,
      },
      [raw, quoted, spaced],
    );
    expect(r.code).toBe(1);
    expect(r.out).toContain('log scan: 4 files, 3 secrets, 4 leaks');
    expect(r.out).toMatch(/LEAK .*test-logs\/w1\/gateway\.log:2: secret #1/);
    expect(r.out).toMatch(/LEAK .*test-logs\/w2\/keyvault\.log:3: secret #2/);
    expect(r.out).toMatch(/LEAK .*state\/log\/gateway\.log:1: secret #3/);
    expect(r.out).toMatch(/LEAK .*abc-json\.log:1: secret #1/);
    for (const s of [raw, quoted, spaced]) expect(r.out).not.toContain(s);
    expect(r.secretsLeft).toBe(false);
  });
});
