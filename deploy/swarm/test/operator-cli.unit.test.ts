import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// The operator's Swarm CLI runs the way the user's does: bin/agenthost-swarm starts deploy/swarm/src/cli.ts on the
// project's Node 24, whatever `node` the PATH has (Debian's 20 failed on the .ts file with ERR_UNKNOWN_FILE_EXTENSION),
// and docs/deploy/swarm.md runs every command through it.

const exec = promisify(execFile);
const root = path.join(import.meta.dirname, '../../..');
const wrapper = path.join(root, 'bin/agenthost-swarm');

async function swarm(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    // Only the system's directories on the PATH: where a fresh Debian has its own `node` (20), if any.
    const r = await exec(wrapper, args, { env: { PATH: '/usr/local/bin:/usr/bin:/bin' }, timeout: 60_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

// Each start loads the whole CLI (seconds on a loaded machine): --help is asked once.
let help: ReturnType<typeof swarm> | undefined;
const asked = () => (help ??= swarm('--help'));

describe('bin/agenthost-swarm', () => {
  it('runs the Swarm CLI on Node 24: --help lists its commands and exits 0, an unknown command exits 2', async () => {
    const help = await asked();
    expect(help.stderr).not.toMatch(/ERR_UNKNOWN_FILE_EXTENSION/);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/up\|scale\|status\|rebalance\|drain\|activate\|doctor\|down/);
    const unknown = await swarm('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/usage: bin\/agenthost-swarm/);
  }, 60_000);

  it('is how docs/deploy/swarm.md runs every command of the Swarm CLI, each one it knows', async () => {
    const doc = readFileSync(path.join(root, 'docs/deploy/swarm.md'), 'utf8');
    expect(doc).not.toMatch(/node deploy\/swarm\/src\/cli\.ts/);
    const usage = (await asked()).stdout;
    const known = /up\|[a-z|]+/.exec(usage)![0].split('|');
    const used = [...doc.matchAll(/bin\/agenthost-swarm (\w+)/g)].map((m) => m[1]!);
    expect(used).toEqual(expect.arrayContaining(['status', 'drain', 'activate', 'rebalance', 'doctor']));
    expect(used.filter((c) => !known.includes(c))).toEqual([]);
  }, 60_000);
});
