import { spawn } from 'node:child_process';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  recordSecret,
  signIn,
  startStack,
  subscribe,
  type Session,
  type Stack,
  cleanupDocker,
  docker,
  dockerTry,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
} from '@agenthost/testkit';
import { keyvaultDb, secretValue, waitFor } from './helpers.ts';

// End to end with the real OpenClaw image: keys stored through the API reach the OpenClaw process's
// environment through the instance bootstrap, and nowhere on the instance's filesystem.
const network = testNetwork('kv');

let stack: Stack;
let owner: Session;
let db: pg.Client;

beforeAll(async () => {
  await cleanupDocker(network);
  const env = provisionerEnv({ network, ports: [18400, 18409] });
  delete env.FRAMEWORK_IMAGES; // the real image map: openclaw → agenthost/openclaw
  delete env.TIER_LIMITS_JSON; // and the real tier resources (OpenClaw needs them)
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    // The keys-in-the-environment path (KEYS_HOT_RELOAD=off); hot reload has its own test (provisioner/test/key-reload.e2e.test.ts).
    serviceEnv: { provisioner: { ...env, READY_TIMEOUT_SECONDS: '150', KEYS_HOT_RELOAD: 'off' }, gateway: gatewayEnv },
  });
  recordSecret(stack.env.MASTER_KEY_ENCRYPTION!);
  owner = await signIn(stack.api);
  await subscribe(stack, owner, { tier: 'pro' });
  db = await keyvaultDb(stack);
}, 240_000);

afterAll(async () => {
  await db?.end();
  await stack?.stop();
  await cleanupDocker(network);
});

const container = (id: string) => `agenthost-${id}`;

/** The container's current credentials, recorded so the log scan proves they never reach a log. */
async function recordCredentials(id: string): Promise<void> {
  const env = JSON.parse(await docker('inspect', '--format', '{{json .Config.Env}}', container(id))) as string[];
  for (const e of env) {
    const m = /^AGENTHOST_INSTANCE_(SECRET|KEY)=(.+)$/.exec(e);
    if (m) recordSecret(m[2]!);
  }
}

/** The agent: the process the bootstrap (pid 1) started. Its environment, as the kernel holds it. */
async function agentEnvironment(id: string): Promise<{ pid: number; cmd: string; env: Map<string, string> } | undefined> {
  const list = await dockerTry(
    'exec',
    container(id),
    'sh',
    '-c',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell script; ${p#/proc/} is the shell's
    'for p in /proc/[0-9]*; do s=$(cat $p/stat 2>/dev/null) || continue; echo "${p#/proc/} $(echo "$s" | sed "s/.*) [A-Z] \\([0-9]*\\) .*/\\1/") $(tr "\\0" " " < $p/cmdline)"; done',
  );
  if (list.code !== 0) return undefined;
  const agent = list.stdout
    .split('\n')
    .map((l) => /^(\d+) (\d+) (.*)$/.exec(l))
    .find((m) => m && m[2] === '1' && m[1] !== '1' && /openclaw/.test(m[3]!));
  if (!agent) return undefined;
  const raw = await dockerTry('exec', container(id), 'cat', `/proc/${agent[1]}/environ`);
  if (raw.code !== 0) return undefined;
  const env = new Map<string, string>();
  for (const kv of raw.stdout.split('\0')) {
    const i = kv.indexOf('=');
    if (i > 0) env.set(kv.slice(0, i), kv.slice(i + 1));
  }
  return { pid: Number(agent[1]), cmd: agent[3]!.trim(), env };
}

async function waitRunning(id: string): Promise<void> {
  await waitFor(
    'instance running',
    async () => {
      const r = await owner.api.get(`/instance/status/${id}`);
      if (r.body.status === 'failed') throw new Error(`instance failed: ${r.body.failure_reason}`);
      return r.body.status === 'running';
    },
    150_000,
  );
}

/** Restart through the API and wait until the recreated OpenClaw process runs. */
async function restart(id: string): Promise<void> {
  const before = await docker('inspect', '--format', '{{.Id}} {{.State.StartedAt}}', container(id));
  const r = await owner.api.post(`/instance/restart/${id}`);
  expect(r.status).toBe(200);
  await waitFor(
    'a new container',
    async () => (await dockerTry('inspect', '--format', '{{.Id}} {{.State.StartedAt}}', container(id))).stdout !== before,
    60_000,
  );
  await waitRunning(id);
  await recordCredentials(id);
}

/** Names of files (container filesystem, its volume and tmpfs) holding any of the values, as the agent's user sees them (exit 2 = some files unreadable to it; docker export covers those). The values go in on stdin. */
function grepContainer(id: string, values: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'docker',
      ['exec', '-i', container(id), 'grep', '-rlsF', '--exclude-dir=proc', '--exclude-dir=sys', '--exclude-dir=dev', '-f', '-', '/'],
      {
        stdio: ['pipe', 'pipe', 'ignore'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 || code === 1 || code === 2 ? resolve(out.split('\n').filter(Boolean)) : reject(new Error(`grep in container exited ${code}`)),
    );
    child.stdin.end(values.map((v) => `${v}\n`).join(''));
  });
}

/** Occurrences of each value in `docker export` (the container's whole root filesystem as a tar stream). */
function scanExport(id: string, values: string[]): Promise<number[]> {
  const needles = values.map((v) => Buffer.from(v));
  const overlap = Math.max(...needles.map((n) => n.length));
  return new Promise((resolve, reject) => {
    const child = spawn('docker', ['export', container(id)], { stdio: ['ignore', 'pipe', 'ignore'] });
    let tail = Buffer.alloc(0);
    const hits = needles.map(() => 0);
    let bytes = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      const buf = Buffer.concat([tail, chunk]);
      needles.forEach((n, i) => {
        for (let at = buf.indexOf(n); at !== -1; at = buf.indexOf(n, at + 1)) if (at + n.length > tail.length) hits[i]!++;
      });
      tail = buf.subarray(Math.max(0, buf.length - overlap + 1));
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 && bytes > 1_000_000 ? resolve(hits) : reject(new Error(`docker export exited ${code} after ${bytes} bytes`))));
  });
}

describe('bring-your-own keys in a real OpenClaw instance', () => {
  it('puts OPENAI_API_KEY into the OpenClaw process environment, updates and removes it across restarts, and never onto disk', async () => {
    const created = await owner.api.post('/instance/create', { framework: 'openclaw' });
    expect(created.status).toBe(200);
    const id = created.body.instance_id as string;
    if (created.body.access_token) recordSecret(created.body.access_token);
    await waitRunning(id);
    await recordCredentials(id);

    const first = secretValue('sk-proj');
    const second = secretValue('sk-proj');
    const other = secretValue('sk-ant');

    // Store, restart: the OpenClaw process has it.
    expect((await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: first, ANTHROPIC_API_KEY: other } })).status).toBe(200);
    await restart(id);
    const withFirst = await waitFor(
      'agent with the stored key',
      async () => {
        const a = await agentEnvironment(id);
        return a?.env.has('OPENAI_API_KEY') ? a : undefined;
      },
      60_000,
    );
    expect(withFirst.env.get('OPENAI_API_KEY') === first).toBe(true);
    expect(withFirst.env.get('ANTHROPIC_API_KEY') === other).toBe(true);
    // The agent never sees what opens the keys.
    expect(withFirst.env.has('AGENTHOST_INSTANCE_SECRET')).toBe(false);
    expect(withFirst.env.has('AGENTHOST_INSTANCE_KEY')).toBe(false);

    // Update, restart: the new value.
    const upd = await owner.api.put('/keys/update', { instance_id: id, key_name: 'OPENAI_API_KEY', key_value: second });
    expect(upd.body).toEqual({
      success: true,
      instance_id: id,
      key_name: 'OPENAI_API_KEY',
      restart_required: true,
      applied: false,
      reason: 'the instance does not reload keys while it runs; restart it to load them',
    });
    await restart(id);
    const withSecond = await waitFor(
      'agent with the updated key',
      async () => {
        const a = await agentEnvironment(id);
        return a && a.pid !== 0 && a.env.get('OPENAI_API_KEY') === second ? a : undefined;
      },
      60_000,
    );
    expect(withSecond.env.get('ANTHROPIC_API_KEY') === other).toBe(true);

    // No plaintext on the instance's disk: the image layers + writable layer, the volume and the tmpfs.
    // (Each scan also looks for a string known to be there, to show it does find things.)
    expect(await grepContainer(id, [first, second, other])).toEqual([]);
    expect(await grepContainer(id, ['"controlUi"'])).toContain('/data/home/.openclaw/openclaw.json');
    const [c1, c2, c3, control] = await scanExport(id, [first, second, other, 'agenthost instance bootstrap']);
    expect([c1, c2, c3]).toEqual([0, 0, 0]);
    expect(control).toBeGreaterThan(0);
    const logs = await dockerTry('logs', container(id));
    for (const v of [first, second, other]) expect((logs.stdout + logs.stderr).includes(v)).toBe(false);

    // Delete, restart: gone.
    const del = await owner.api.del('/keys/delete', { instance_id: id, key_names: ['OPENAI_API_KEY'] });
    expect(del.body).toMatchObject({ success: true, instance_id: id, keys_deleted: 1, applied: false });
    await restart(id);
    const without = await waitFor(
      'agent without the deleted key',
      async () => {
        const a = await agentEnvironment(id);
        return a?.env.has('ANTHROPIC_API_KEY') ? a : undefined;
      },
      60_000,
    );
    expect(without.env.has('OPENAI_API_KEY')).toBe(false);
    expect(await grepContainer(id, [first, second, other])).toEqual([]);

    // The audit trail shows the bootstrap's retrievals from the instance's address.
    const audit = await owner.api.get(`/keys/audit?instance_id=${id}&limit=100`);
    const retrieved = (audit.body.records as Array<{ action: string; user_agent: string; ip_address: string }>).filter((r) => r.action === 'key_retrieved');
    expect(retrieved.length).toBeGreaterThanOrEqual(5);
    expect(retrieved[0]!.user_agent).toBe('agenthost-bootstrap/1');
    expect(retrieved[0]!.ip_address).not.toMatch(/^(::ffff:)?127\./);

    // Deleting the instance deletes its keys and credentials.
    expect((await owner.api.del(`/instance/delete/${id}`)).status).toBe(200);
    await waitFor('keys purged', async () => (await db.query('select 1 from instances where instance_id = $1', [id])).rowCount === 0, 30_000);
    expect((await db.query('select count(*)::int as n from api_keys where instance_id = $1', [id])).rows[0].n).toBe(0);
    expect((await owner.api.get(`/keys/list?instance_id=${id}`)).status).toBe(404);
  }, 900_000);
});
