import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import {
  startStack,
  type Stack,
  cleanupDocker,
  docker,
  gatewayEnv,
  natsClient,
  newUser,
  provisionerEnv,
  testNetwork,
  waitFor,
  type Nats,
} from '@agenthost/testkit';
import { auditContainer } from '../src/doctor/checks.ts';
import { firewallTag } from '../src/docker/firewall.ts';
import { waitRunning } from './helpers.ts';

const P = contracts.provisioner;
const network = testNetwork('doctor');
const PORTS: [number, number] = [18760, 18769];
const DOCTOR = fileURLToPath(new URL('../src/doctor/main.ts', import.meta.url));
const env = provisionerEnv({ network, ports: PORTS });

let stack: Stack;
let n: Nats;
/** An instance of the first test, made an orphan by the second. */
let second = '';

beforeAll(async () => {
  await cleanupDocker(network);
  stack = await startStack({ services: ['keyvault', 'provisioner'], serviceEnv: { provisioner: env, gateway: gatewayEnv } });
  n = await natsClient(stack.nats);
});

afterAll(async () => {
  try {
    await n?.close();
    await stack?.stop();
  } finally {
    await cleanupDocker(network);
  }
});

interface Run {
  code: number;
  stdout: string;
  report: { ok: boolean; instances: number; drift: { instance_id?: string; check: string; problem: string; fix: string }[] };
}

/** `agenthost doctor` as an operator runs it, with the provisioner's settings and database role. */
async function doctor(...args: string[]): Promise<Run> {
  const run = (extra: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [DOCTOR, ...extra],
        { env: { PATH: process.env.PATH, ...stack.envFor('provisioner'), ...env }, timeout: 120_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      ),
    );
  const r = await run(['--json', ...args]);
  if (r.code === 2) throw new Error(`doctor could not run: ${r.stderr}`);
  return { code: r.code, stdout: (await run(args)).stdout, report: JSON.parse(r.stdout) };
}

const running = (user_id: string, instance_id: string) => waitRunning(n, user_id, instance_id, 60_000);

describe('agenthost doctor', () => {
  it('passes on a fresh stack, then names the instance whose pids limit was loosened by hand and the fix that heals it', async () => {
    const user_id = newUser();
    const a = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    const b = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    await running(user_id, a.instance_id);
    await running(user_id, b.instance_id);
    second = b.instance_id;

    const fresh = await doctor();
    expect(fresh.report.drift).toEqual([]);
    expect(fresh).toMatchObject({ code: 0, report: { ok: true, instances: 2 } });
    expect(fresh.stdout).toMatch(/ok: no drift/);

    await docker('update', '--pids-limit', '4096', `agenthost-${a.instance_id}`);
    const loose = await doctor();
    expect(loose.code).toBe(1);
    expect(loose.report.drift).toEqual([
      {
        instance_id: a.instance_id,
        check: 'pids limit',
        problem: 'pids limit 4096, intended 64',
        fix: `docker update --pids-limit 64 agenthost-${a.instance_id}`,
      },
    ]);
    expect(loose.stdout).toContain(`DRIFT ${a.instance_id} pids limit`);

    // The fix it names is the fix.
    await docker('update', '--pids-limit', '64', `agenthost-${a.instance_id}`);
    expect((await doctor()).code).toBe(0);
  }, 180_000);

  it('fails when a host firewall rule is removed or an instance has lost its row, and passes once the provisioner has repaired both', async () => {
    // Stopped first: its reconciler would put the rule back within seconds, before the doctor looks.
    const provisioner = stack.services.get('provisioner')!;
    await provisioner.stop();
    const rules = (await execOut('iptables', ['-S', 'INPUT']))
      .split('\n')
      .filter((l) => l.includes(firewallTag(network)) && l.includes('--dport') && !l.includes('--dport 53'));
    expect(rules).toHaveLength(1); // the gateway port
    await execOut('iptables', ['-D', ...rules[0]!.replace(/"/g, '').split(/\s+/).slice(1)]);
    const admin = new pg.Client({ connectionString: stack.db.url });
    await admin.connect();
    await admin.query('delete from provisioner.instances where id = $1', [second]).finally(() => admin.end());
    const broken = await doctor();
    expect(broken.code).toBe(1);
    expect(broken.report.drift).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          check: 'firewall',
          problem: expect.stringMatching(/missing from INPUT: .* --dport \d+ .* -j ACCEPT/),
          fix: expect.stringMatching(/restart the provisioner/),
        }),
        expect.objectContaining({ instance_id: second, check: 'orphan', problem: expect.stringMatching(/^container agenthost-inst-\w+ has no instance/) }),
        expect.objectContaining({ instance_id: second, check: 'orphan', problem: expect.stringMatching(/^volume agenthost-inst-\w+ has no instance/) }),
      ]),
    );
    expect(broken.report.drift.filter((f) => f.check !== 'firewall').every((f) => f.instance_id === second && f.check === 'orphan')).toBe(true);

    await provisioner.start();
    await waitFor('the doctor to pass again', async () => ((await doctor()).code === 0 ? true : undefined), 60_000, 1000);
  }, 180_000);

  it('finds a credential in a container configuration, by name or by value', async () => {
    const user_id = newUser();
    const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    await running(user_id, c.instance_id);
    const info = JSON.parse(await docker('inspect', `agenthost-${c.instance_id}`))[0];
    const image = JSON.parse(await docker('image', 'inspect', info.Image))[0];
    // The real container's configuration, with credentials added to it (a running container's cannot be edited).
    const row = { id: c.instance_id, pids: 64, memory_mb: 256, cpus: 0.5, port: c.port, access_token_hash: '' } as Parameters<typeof auditContainer>[0];
    const intent = { network, publishHost: '127.0.0.1', extraEnv: [] };
    info.Config.Env.push('MY_DB=postgres://app:hunter2@db.internal/app', 'AGENTHOST_INSTANCE_SECRET=x');
    info.Config.Labels.note = '-----BEGIN PRIVATE KEY-----';
    const secrets = auditContainer(row, info, image, intent).filter((f) => f.check === 'secrets');
    expect(secrets.map((f) => f.problem).sort()).toEqual([
      'environment variable AGENTHOST_INSTANCE_SECRET holds a credential',
      'environment variable MY_DB holds a credential',
      'label note holds a credential',
    ]);
    await n.call(P.remove, { user_id, instance_id: c.instance_id });
  }, 120_000);
});

function execOut(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => execFile(cmd, args, (err, stdout) => (err ? reject(err) : resolve(stdout))));
}
