import { setTimeout as sleep } from 'node:timers/promises';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, type Session, docker, containerName, instanceStack } from '@agenthost/testkit';
import { signedInHome } from './cli-home.ts';

// The CLI's instance commands as a newcomer runs them: through bin/agenthost (the project's Node 24; the PATH here
// has only the system's directories, where `node` may be Debian's 20), against a whole stack with real containers.

const exec = promisify(execFile);
const wrapper = path.join(repoRoot, 'bin/agenthost');
let sys: Awaited<ReturnType<typeof instanceStack>>;
let alice: Session;
let home: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  sys = await instanceStack('cli', [19410, 19419]);
  alice = await sys.subscriber();
  home = signedInHome(alice, 'cli');
}, 240_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill();
  await sys?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

const env = () => ({ PATH: '/usr/local/bin:/usr/bin:/bin', AGENTHOST_HOME: home, AGENTHOST_API_URL: sys.stack.baseUrl });

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec('bash', [wrapper, ...args], { env: env(), timeout: 180_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A long-running command (logs -f, events): its output so far, and a promise of its exit. */
function background(...args: string[]) {
  const child = spawn('bash', [wrapper, ...args], { env: env() });
  children.push(child);
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const until = async (re: RegExp, what: string) => {
    for (let i = 0; i < 240 && !re.test(out.stdout); i++) {
      if (child.exitCode !== null) throw new Error(`${what}: exited ${child.exitCode}: ${out.stderr}`);
      await sleep(250);
    }
    expect(out.stdout, what).toMatch(re);
  };
  return { out, exited, until };
}

describe('agenthost instance commands through bin/agenthost', () => {
  it('creates with --wait and prints running, follows logs, prints events, and stops and deletes with --wait', async () => {
    const created = await cli('create', '--name', 'cli-agent', '--wait');
    expect(created.code, created.stderr).toBe(0);
    const id = JSON.parse(created.stdout.slice(0, created.stdout.lastIndexOf('}') + 1)).instance_id as string;
    expect(created.stdout).toContain(`${id} running`);
    expect(created.stderr).toContain(`${id}: provisioning`); // the progress display, from the event stream
    expect((await cli('list')).stdout).toMatch(new RegExp(`${id}\\s+running\\s+cli-agent`));

    const follow = background('logs', id, '-f', '--tail', '1');
    const events = background('events', id);
    await events.until(/current running/, 'events opens with the current status');
    await docker('exec', containerName(id), 'sh', '-c', "echo 'hello from the agent' > /proc/1/fd/1");
    await follow.until(/hello from the agent/, 'logs -f prints a line written after it started');

    const stopped = await cli('stop', id, '--wait');
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout).toContain(`${id} stopped`);
    await events.until(/status stopped/, 'events prints the stop');

    const deleted = await cli('delete', id, '--wait');
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toContain(`${id} deleted`);
    // Both streams end by themselves with the instance.
    expect(await events.exited).toBe(0);
    expect(events.out.stdout).toMatch(/deleted\s*$/);
    expect(await follow.exited).toBe(0);
  }, 300_000);

  it("refuses another user's instance with its code, exit 1", async () => {
    const bob = await sys.subscriber();
    const theirs = (await bob.api.post('/instance/create', { framework: 'openclaw' })).body.instance_id as string;
    const r = await cli('logs', theirs, '-f');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/\(404 INSTANCE_NOT_FOUND\)/);
    await bob.api.del(`/instance/delete/${theirs}`);
  });
});
