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

describe('bin/agenthost on bad or odd input', () => {
  // No session here: a line the CLI accepts stops at "not signed in" (exit 1), which tells it from a usage error
  // (exit 2) without an API. See argv.unit.test.ts for how each line is read.
  it.each([
    ['create --verbose', 1], // an unknown option is ignored, as it always was
    ['logs i-1 --tail', 1], // so is an option at the end without its value
    ['status', 2],
    ['status --verbose', 2], // the hand parser took "--verbose" for the id (then exit 1, no such instance)
    ['--wait create', 2], // the command comes first
    ['devices i-1 maybe', 2],
    ['airdrop 0', 2],
    ['subscribe gold', 2],
    ['webhooks listen', 2], // --forward-to is required
    ['toString', 2], // not a command, whatever JavaScript objects have
  ])(
    '`agenthost %s` exits %i',
    async (line, code) => {
      const r = await run(...line.split(' '));
      expect(r.code).toBe(code);
      expect(r.stdout).toBe('');
      if (code === 1) expect(r.stderr).toBe('error: not signed in: run `agenthost login`\n');
      else expect(r.stderr).toContain('agenthost create [--name N]');
    },
    60_000,
  );

  it('`agenthost create --name --help` prints the help instead of making an instance named --help', async () => {
    const r = await run('create', '--name', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('agenthost create [--name N]');
  }, 60_000);
});
