import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { contracts } from '@agenthost/shared';
import { eventHistory, recordSecret, STANDIN, docker, dockerTry, exists, newUser, standinVariant, waitFor, type Nats } from '@agenthost/testkit';
import { OpLocks } from '../src/domain/locks.ts';
import { instanceSuite, waitRunning } from './helpers.ts';

// An instance's keys over its life (removed with it, fetched again after a crash) are in lifecycle-keys.test.ts.
const P = contracts.provisioner;
const PORTS: [number, number] = [18100, 18119];
const suite = instanceSuite('life', PORTS, { READY_TIMEOUT_SECONDS: '8' });
const { network } = suite;

let n: Nats;
beforeAll(() => {
  ({ n } = suite);
});
afterAll(async () => {
  await dockerTry('rmi', `${STANDIN}:t-neverready`);
});

const running = (user_id: string, instance_id: string) => waitRunning(n, user_id, instance_id);

describe('instance lifecycle on the real Docker engine', () => {
  it('creates, runs, restarts, stops, starts and deletes an instance, leaving nothing behind', async () => {
    const user_id = newUser();
    const created = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', name: 'my agent' });
    expect(created).toMatchObject({ name: 'my agent', status: 'provisioning', framework: 'openclaw', version: 'latest' });
    expect(created.port).toBeGreaterThanOrEqual(PORTS[0]);
    expect(created.port).toBeLessThanOrEqual(PORTS[1]);
    expect(created.url).toBe(`https://${created.instance_id}.agenthost.localhost`);
    expect(created.access_token).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    recordSecret(created.access_token!); // the log scan proves it never reaches a log line
    expect(Date.parse(created.estimated_ready!)).toBeGreaterThan(Date.parse(created.created_at));
    const id = created.instance_id;
    const cname = `agenthost-${id}`;

    // The container carries the hardening and limits of its tier.
    const info = JSON.parse(await docker('inspect', cname))[0];
    expect(info.Config.User).toBe('10001:10001');
    expect(info.Config.Labels).toMatchObject({ 'agenthost.instance': id, 'agenthost.user': user_id, 'agenthost.managed': 'true' });
    expect(info.HostConfig).toMatchObject({
      CapDrop: ['ALL'],
      ReadonlyRootfs: true,
      PidsLimit: 64,
      Memory: 256 * 1024 * 1024,
      MemorySwap: 256 * 1024 * 1024,
    });
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges:true');
    // Crashes are restarted by the provisioner's self-healing (healing.test.ts), under an init as PID 1.
    expect(info.HostConfig.RestartPolicy).toMatchObject({ Name: 'no' });
    expect(info.HostConfig.Init).toBe(true);
    expect(info.HostConfig.LogConfig).toMatchObject({ Type: 'json-file', Config: { 'max-size': '10m' } });
    expect(info.HostConfig.PortBindings['18789/tcp']).toEqual([{ HostIp: '127.0.0.1', HostPort: String(created.port) }]);
    expect(info.HostConfig.Tmpfs['/tmp']).toContain('size=64m');
    expect(info.Mounts).toEqual([expect.objectContaining({ Type: 'volume', Name: cname, Destination: '/data' })]);
    const env: string[] = info.Config.Env;
    // The instance credentials are handed over on stdin at start: nothing in the configuration can fetch keys.
    expect(env.filter((e) => /^AGENTHOST_INSTANCE_(SECRET|KEY)=/.test(e))).toEqual([]);
    expect(env).toContain('AGENTHOST_CREDENTIALS=stdin');
    expect(info.Config.OpenStdin).toBe(true);
    expect(env).toContain('NODE_OPTIONS=--max-old-space-size=192');
    expect(env).toContain(`OPENCLAW_GATEWAY_TOKEN=${created.access_token}`);
    expect(env.find((e) => e.startsWith('AGENTHOST_KEYS_URL='))).toMatch(/^AGENTHOST_KEYS_URL=http:\/\/\d+\.\d+\.\d+\.\d+:\d+\/api\/keys\/retrieve$/);
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([network]);

    // provisioning → running once /readyz answers (the bootstrap fetched its keys through the gateway first).
    const up = await running(user_id, id);
    // It may boot on a burst of CPU (boot-burst.test.ts); running, it has its tier's share.
    expect(JSON.parse(await docker('inspect', cname))[0].HostConfig.NanoCpus).toBe(5e8);
    expect(up.uptime_seconds).toBeGreaterThanOrEqual(0);
    expect(up.memory_limit_mb).toBe(256);
    expect(up.memory_usage_mb).toBeGreaterThan(1);
    expect(up.memory_usage_mb).toBeLessThan(256);
    expect(up.cpu_usage_percent).toBeGreaterThanOrEqual(0);
    expect(Date.parse(up.last_activity!)).toBeGreaterThanOrEqual(Date.parse(created.created_at));
    const agent = await (await fetch(`http://127.0.0.1:${created.port}/`)).json();
    expect(agent).toMatchObject({ agent: 'standin', instance_id: id, uid: 10001 });

    const logs = await n.call(P.logs, { user_id, instance_id: id, tail: 50 });
    expect(logs.lines.some((l) => l.includes('keys fetched') || l.includes('keys loaded'))).toBe(true);
    expect(logs.lines.join('\n')).not.toContain(created.access_token!);

    const listed = await n.call(P.list, { user_id });
    expect(listed.instances.map((i) => i.instance_id)).toEqual([id]);

    // restart: a new container (fresh credentials) on the same volume and port, token carried over.
    const oldContainer = info.Id;
    await docker('exec', cname, 'sh', '-c', 'echo kept > /data/marker');
    const restarted = await n.call(P.restart, { user_id, instance_id: id });
    expect(restarted).toEqual({ success: true, instance_id: id, status: 'provisioning' });
    await running(user_id, id);
    const info2 = JSON.parse(await docker('inspect', cname))[0];
    expect(info2.Id).not.toBe(oldContainer);
    expect(info2.HostConfig.PortBindings['18789/tcp'][0].HostPort).toBe(String(created.port));
    expect(info2.Config.Env).toContain(`OPENCLAW_GATEWAY_TOKEN=${created.access_token}`);
    // Its credentials came on stdin again: still nothing in its configuration.
    expect(info2.Config.Env.filter((e: string) => /^AGENTHOST_INSTANCE_(SECRET|KEY)=/.test(e))).toEqual([]);
    expect(await docker('exec', cname, 'cat', '/data/marker')).toBe('kept');

    // stop → stopped (data kept); stopping again is a state conflict.
    expect(await n.call(P.stop, { user_id, instance_id: id })).toEqual({ success: true, instance_id: id, status: 'stopped' });
    expect((await n.call(P.get, { user_id, instance_id: id })).status).toBe('stopped');
    expect(JSON.parse(await docker('inspect', cname))[0].State.Running).toBe(false);
    expect(await n.fail(P.stop, { user_id, instance_id: id })).toMatchObject({ code: 'INSTANCE_STATE_CONFLICT', status: 409 });
    expect(await n.fail(P.restart, { user_id, instance_id: id })).toMatchObject({ code: 'INSTANCE_STATE_CONFLICT', status: 409 });

    // start → provisioning → running, data still there.
    expect(await n.call(P.start, { user_id, instance_id: id })).toEqual({ success: true, instance_id: id, status: 'provisioning' });
    await running(user_id, id);
    expect(await docker('exec', cname, 'cat', '/data/marker')).toBe('kept');
    expect(await n.fail(P.start, { user_id, instance_id: id })).toMatchObject({ code: 'INSTANCE_STATE_CONFLICT' });

    // delete: container, volume, lease and row gone for good.
    const del = await n.call(P.remove, { user_id, instance_id: id });
    expect(del).toMatchObject({ success: true, instance_id: id });
    expect(Date.parse(del.deleted_at)).toBeGreaterThan(0);
    const inspect = await dockerTry('inspect', '--type', 'container', cname);
    expect(inspect.code).not.toBe(0);
    expect(inspect.stderr).toMatch(/No such container/i);
    expect(await exists('volume', cname)).toBe(false);
    expect(await n.fail(P.get, { user_id, instance_id: id })).toMatchObject({ code: 'INSTANCE_NOT_FOUND', status: 404 });
    expect(await n.fail(P.remove, { user_id, instance_id: id })).toMatchObject({ code: 'INSTANCE_NOT_FOUND' });
    expect((await n.call(P.usage, { user_id })).instances_active).toBe(0);

    // The port is free again: the next create gets the same (lowest free) port.
    const again = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    expect(again.port).toBe(created.port);
    expect(again.name).toMatch(/^openclaw-[0-9a-f]{6}$/);
    await n.call(P.remove, { user_id, instance_id: again.instance_id });
  });

  it('publishes every status change of an instance on JetStream, in order, between .created and .deleted', async () => {
    const user_id = newUser();
    const jsm = await n.nc.jetstreamManager();
    const last = async (subject: string) => {
      const m = await jsm.streams.getMessage('EVENTS', { last_by_subj: subject }).catch(() => undefined);
      return m && { subject: m.subject, data: m.json<Record<string, unknown>>() };
    };
    const history = async () =>
      (await eventHistory<{ instance_id: string; status: string; generation: number; seq: number }>(n.nc, 'events.instance.status')).filter(
        (e) => e.instance_id === created.instance_id,
      );
    const running = async () =>
      waitFor('running', async () => (await n.call(P.get, { user_id, instance_id: created.instance_id })).status === 'running', 30_000);
    const created = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    await running();
    await n.call(P.stop, { user_id, instance_id: created.instance_id });
    await n.call(P.start, { user_id, instance_id: created.instance_id });
    await running();
    await n.call(P.restart, { user_id, instance_id: created.instance_id });
    await running();
    await waitFor('seven status events', async () => (await history()).length >= 7, 10_000);
    const seen = await history();
    expect(seen.map((e) => e.status)).toEqual(['provisioning', 'running', 'stopped', 'provisioning', 'running', 'provisioning', 'running']);
    expect(seen[0]).toEqual({
      instance_id: created.instance_id,
      user_id,
      status: 'provisioning',
      at: expect.any(String),
      generation: expect.any(Number),
      seq: expect.any(Number),
    });
    // In order, and a start or restart is a new generation of the instance.
    expect(seen.map((e) => e.seq)).toEqual([...seen.map((e) => e.seq)].sort((a, b) => a - b));
    expect(seen[3]!.generation).toBeGreaterThan(seen[1]!.generation);
    expect(seen[5]!.generation).toBeGreaterThan(seen[3]!.generation);
    await n.call(P.remove, { user_id, instance_id: created.instance_id });
    expect(await last('events.instance.created')).toEqual({
      subject: 'events.instance.created',
      data: expect.objectContaining({ instance_id: created.instance_id, user_id }),
    });
    expect(await last('events.instance.deleted')).toEqual({
      subject: 'events.instance.deleted',
      data: expect.objectContaining({ instance_id: created.instance_id, user_id }),
    });
  });

  it("answers 404 for another user's instance on every verb", async () => {
    const owner = newUser();
    const other = newUser();
    const { instance_id } = await n.call(P.create, { user_id: owner, tier: 'pro', framework: 'openclaw' });
    const ref = { user_id: other, instance_id };
    for (const [c, input] of [
      [P.get, ref],
      [P.restart, ref],
      [P.stop, ref],
      [P.start, ref],
      [P.remove, ref],
      [P.logs, { ...ref, tail: 10 }],
    ] as const) {
      expect(await n.fail(c, input as never), c.subject).toMatchObject({ code: 'INSTANCE_NOT_FOUND', status: 404 });
    }
    expect((await n.call(P.list, { user_id: other })).instances).toEqual([]);
    // Untouched for its owner.
    expect((await n.call(P.get, { user_id: owner, instance_id })).instance_id).toBe(instance_id);
    await n.call(P.remove, { user_id: owner, instance_id });
  });

  it('refuses a bad framework, version or name with 400 naming the field', async () => {
    const user_id = newUser();
    const base = { user_id, tier: 'pro' as const, framework: 'openclaw' };
    const cases: [Record<string, unknown>, string][] = [
      [{ framework: 'langchain' }, 'framework'],
      [{ framework: '' }, 'framework'],
      // Names of Object.prototype's properties are unknown frameworks, not a 500.
      [{ framework: 'constructor' }, 'framework'],
      [{ framework: '__proto__' }, 'framework'],
      [{ framework: 'toString' }, 'framework'],
      [{ version: 'no-such-version' }, 'version'],
      [{ version: '../etc' }, 'version'],
      [{ version: 'a:b' }, 'version'],
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(64) }, 'name'],
      [{ name: '<script>' }, 'name'],
    ];
    for (const [patch, field] of cases) {
      const e = await n.fail(P.create, { ...base, ...patch } as never);
      expect(e, JSON.stringify(patch)).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
      expect(e.message.startsWith(`${field}:`), `${JSON.stringify(patch)} → ${e.message}`).toBe(true);
    }
    expect((await n.call(P.usage, { user_id })).instances_active).toBe(0);
  });

  it('refuses to create for a cancelled subscription (403)', async () => {
    const e = await n.fail(P.create, { user_id: newUser(), tier: 'pro', framework: 'openclaw', subscription_cancelled: true });
    expect(e).toMatchObject({ code: 'SUBSCRIPTION_CANCELLED', status: 403 });
  });

  it('marks an instance failed with a reason when the agent never becomes ready, and stops it', async () => {
    await standinVariant('t-neverready', { STANDIN_NEVER_READY: '1' });
    const user_id = newUser();
    const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', version: 't-neverready' });
    const v = await waitFor(
      'failed',
      async () => {
        const s = await n.call(P.get, { user_id, instance_id: c.instance_id });
        return s.status === 'failed' ? s : undefined;
      },
      30_000,
    );
    expect(v.failure_reason).toMatch(/did not become ready within 8 s/);
    await waitFor('container stopped', async () => JSON.parse(await docker('inspect', `agenthost-${c.instance_id}`))[0].State.Running === false);
    // A failed instance can be deleted (and restarted: healing.test.ts shows it for an agent that exits at every boot).
    await n.call(P.remove, { user_id, instance_id: c.instance_id });
  });

  it('stops an agent that never became ready even when another operation held its lock at the deadline', async () => {
    // Every reconcile pass takes each instance's lock for a moment; a stop that found it held was skipped for good.
    await standinVariant('t-neverready', { STANDIN_NEVER_READY: '1' });
    const user_id = newUser();
    const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', version: 't-neverready' });
    const locks = new OpLocks(suite.stack.db.url, 'provisioner');
    const release = await locks.hold(c.instance_id);
    try {
      await waitFor('failed', async () => (await n.call(P.get, { user_id, instance_id: c.instance_id })).status === 'failed', 30_000);
      await sleep(1000); // the watcher's stop is now waiting for the lock
    } finally {
      await release();
      await locks.close();
    }
    await waitFor('container stopped', async () => JSON.parse(await docker('inspect', `agenthost-${c.instance_id}`))[0].State.Running === false);
    await n.call(P.remove, { user_id, instance_id: c.instance_id });
  });

  it('reports usage: active instances and volume storage', async () => {
    const user_id = newUser();
    const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    await running(user_id, c.instance_id);
    await docker('exec', `agenthost-${c.instance_id}`, 'sh', '-c', 'head -c 3145728 /dev/zero > /data/blob');
    const u = await waitFor(
      'storage measured',
      async () => {
        const r = await n.call(P.usage, { user_id });
        return r.storage_used_mb >= 3 ? r : undefined;
      },
      30_000,
      500,
    );
    expect(u.instances_active).toBe(1);
    expect(u.storage_used_mb).toBeLessThan(10);
    await n.call(P.remove, { user_id, instance_id: c.instance_id });
    expect(await n.call(P.usage, { user_id })).toEqual({
      instances_active: 0,
      storage_used_mb: 0,
      restarts: 0,
      oom_kills: 0,
      cpu_usage_percent: 0,
      memory_usage_mb: 0,
    });
  });
});
