import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// bin/agenthost as a newcomer types it first: asking for help is not a mistake, an unknown command is.

const exec = promisify(execFile);
const wrapper = path.join(import.meta.dirname, '../../../bin/agenthost');

async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec('bash', [wrapper, ...args], { env: { PATH: '/usr/local/bin:/usr/bin:/bin', AGENTHOST_HOME: '/nonexistent' }, timeout: 60_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('bin/agenthost help', () => {
  it.each(['--help', '-h', 'help', 'create --help'])(
    '`agenthost %s` prints the commands on stdout and exits 0',
    async (line) => {
      const r = await run(...line.split(' '));
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('agenthost create [--name N]');
      expect(r.stderr).toBe('');
    },
    60_000,
  );

  it('an unknown command prints the commands on stderr and exits 2', async () => {
    const r = await run('frobnicate');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('agenthost create [--name N]');
  }, 60_000);
});
