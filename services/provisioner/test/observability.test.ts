import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from 'nats';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  eventHistory,
  freePort,
  recordSecret,
  signIn,
  startOtlpReceiver,
  startPrometheus,
  startStack,
  subscribe,
  waitFor,
  type ReceivedSpan,
  type Session,
  type Stack,
  cleanupDocker,
  gatewayEnv,
  provisionerEnv,
  standinVariant,
  testNetwork,
} from '@agenthost/testkit';

// What an operator sees of a running stack: Prometheus scraping every service, one trace per request across
// the bus, crashes and OOM kills in the counters and the instance's status, health on the operator port,
// $SRV.STATS that counts errors, and no user, wallet, instance or key identifier in any label.

const network = testNetwork('observe');
const SERVICES = ['auth', 'billing-chain', 'keyvault', 'provisioner', 'gateway'] as const;

let stack: Stack;
let user: Session;
let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
let nc: NatsConnection;
const ports: Record<string, number> = {};
/** Every identifier this file's requests carried: none may show up as a label value (see the last test). */
const identifiers = new Set<string>();
const exec = promisify(execFile);

beforeAll(async () => {
  await cleanupDocker(network);
  otlp = await startOtlpReceiver();
  for (const s of SERVICES) ports[s] = await freePort();
  const metrics = (s: string) => ({ METRICS_PORT: String(ports[s]) });
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, TRACE_SAMPLE_RATIO: '1', OTEL_BSP_SCHEDULE_DELAY: '200' },
    serviceEnv: {
      auth: metrics('auth'),
      'billing-chain': metrics('billing-chain'),
      keyvault: metrics('keyvault'),
      provisioner: { ...provisionerEnv({ network, ports: [19500, 19549] }), ...metrics('provisioner') },
      gateway: { ...gatewayEnv, ...metrics('gateway') },
    },
  });
  user = await signIn(stack.api);
  await subscribe(stack, user, { tier: 'pro' });
  nc = await stack.nats.connect();
  identifiers.add(user.user_id).add(user.wallet.address);
}, 180_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
  otlp?.close();
  await cleanupDocker(network);
});

const get = (port: number, path: string) => fetch(`http://127.0.0.1:${port}${path}`);

/** The provisioner's own exposition: a sample of `name` whose labels include `label` (0 while there is none). */
async function sample(name: string, label = ''): Promise<number> {
  const text = await (await get(ports.provisioner!, '/metrics')).text();
  const line = text.split('\n').find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && l.includes(label));
  return Number(line?.split(' ').pop() ?? 0);
}

/** Create an instance of the stand-in `version` and wait until its agent is running. */
async function running(version?: string): Promise<string> {
  const c = await user.api.post('/instance/create', { framework: 'openclaw', ...(version ? { version } : {}) });
  expect(c.status).toBe(200);
  recordSecret(c.body.access_token);
  identifiers.add(c.body.instance_id);
  await waitFor('the agent running', async () => (await user.api.get(`/instance/status/${c.body.instance_id}`)).body.status === 'running', 120_000);
  return c.body.instance_id as string;
}

describe('observability', () => {
  it('Prometheus scrapes every service, and its request counts match the requests made', async () => {
    const prom = await startPrometheus(SERVICES.map((s) => ({ job: s, target: `127.0.0.1:${ports[s]}` })));
    try {
      const made = 7;
      for (let i = 0; i < made; i++) expect((await user.api.get('/subscription/status')).status).toBe(200);
      const missing = await user.api.get('/instance/status/00000000-0000-4000-8000-000000000000');
      expect(missing.status).toBe(404);

      await waitFor('every service scraped', async () => {
        const up = await prom.query('up == 1');
        return up.length === SERVICES.length ? up : undefined;
      });
      const count = (q: string) => prom.query(q).then((r) => Number(r[0]?.value[1] ?? 0));
      await waitFor(
        'the status requests counted',
        async () => (await count('sum(agenthost_http_requests_total{route="/subscription/status",method="GET",status="200"})')) === made,
      );
      // The 404 came from the provisioner over NATS: counted at the gateway by route pattern (no id in any label),
      // and at the provisioner as a served request that ended in INSTANCE_NOT_FOUND.
      await waitFor(
        'the 404 counted at the gateway',
        async () => (await count('sum(agenthost_http_requests_total{route="/instance/status/:instanceId",status="404"})')) === 1,
      );
      await waitFor(
        'the 404 counted at the provisioner',
        async () => (await count('sum(agenthost_nats_requests_total{job="provisioner",subject="provisioner.v1.instances.get",outcome!="OK"})')) === 1,
      );
      // Every service exports its process metrics and its NATS connection state.
      await waitFor('process metrics of every service', async () => (await prom.query('agenthost_process_resident_memory_bytes')).length === SERVICES.length);
      await waitFor('every service connected to NATS', async () => (await count('sum(agenthost_nats_connected)')) === SERVICES.length);
      const text = await (await get(ports.gateway!, '/metrics')).text();
      expect(text).not.toContain('00000000-0000-4000-8000-000000000000');
      expect(text).not.toContain(user.user_id);
      expect(text).not.toContain(user.wallet.address);
    } finally {
      await prom.stop();
    }
  });

  it('one trace follows an instance create from the gateway through NATS to Postgres and Docker', async () => {
    const c = await user.api.post('/instance/create', { framework: 'openclaw', name: 'traced' });
    expect(c.status).toBe(200);
    recordSecret(c.body.access_token);
    identifiers.add(c.body.instance_id);
    const requestId = c.headers.get('x-request-id');
    const byName = (spans: ReceivedSpan[], name: string) => spans.find((s) => s.name === name);
    const trace = await waitFor('the spans of every hop', async () => {
      const root = otlp.spans.find((s) => s.name === 'POST /instance/create' && s.attributes['agenthost.request_id'] === requestId);
      if (!root) return undefined;
      const spans = otlp.spans.filter((s) => s.traceId === root.traceId);
      const ok =
        ['nats provisioner.v1.instances.create', 'provisioner.v1.instances.create', 'docker container create'].every((n) => byName(spans, n)) &&
        spans.some((s) => s.service === 'provisioner' && s.name.startsWith('pg '));
      return ok ? { root, spans } : undefined;
    });
    const { root, spans } = trace;
    const client = byName(spans, 'nats provisioner.v1.instances.create')!;
    const server = byName(spans, 'provisioner.v1.instances.create')!;
    expect(root).toMatchObject({ service: 'gateway', parentSpanId: '' });
    expect(client).toMatchObject({ service: 'gateway', parentSpanId: root.spanId });
    expect(server).toMatchObject({ service: 'provisioner', parentSpanId: client.spanId });
    // Postgres queries and Docker calls made for the request are descendants of the provisioner's span.
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const under = (s: ReceivedSpan, ancestor: ReceivedSpan) => {
      for (let p = byId.get(s.parentSpanId); p; p = byId.get(p.parentSpanId)) if (p.spanId === ancestor.spanId) return true;
      return false;
    };
    expect(under(byName(spans, 'docker container create')!, server)).toBe(true);
    expect(spans.filter((s) => s.service === 'provisioner' && s.name.startsWith('pg ')).every((s) => under(s, server))).toBe(true);
    // The gateway's access log line links the request id to the trace.
    const line = stack.gateways[0]!.lines().find((l) => l.includes(`"request_id":"${requestId}"`));
    expect(line).toContain(`"trace_id":"${root.traceId}"`);
    await user.api.del(`/instance/delete/${c.body.instance_id}`);
  });

  it('a crash-looping instance shows in the restart and crash counters', async () => {
    const restarts = () => sample('agenthost_instance_restarts_total');
    const crashes = () => sample('agenthost_instance_exits_total', 'reason="crash"');
    const before = { restarts: await restarts(), crashes: await crashes() };
    await standinVariant('t-obs-crash', { STANDIN_EXIT_AFTER_MS: '1000', STANDIN_EXIT_CODE: '3' });
    const c = await user.api.post('/instance/create', { framework: 'openclaw', version: 't-obs-crash' });
    expect(c.status).toBe(200);
    recordSecret(c.body.access_token);
    identifiers.add(c.body.instance_id);
    await waitFor(
      'the engine restarting the crashed agent, counted',
      async () => (await restarts()) > before.restarts && (await crashes()) > before.crashes,
      60_000,
    );
    await user.api.del(`/instance/delete/${c.body.instance_id}`);
  });

  it('an OOM-killed instance shows in its status, its lifecycle events and the OOM counter', async () => {
    const before = { kills: await sample('agenthost_instance_oom_kills_total'), exits: await sample('agenthost_instance_exits_total', 'reason="oom"') };
    // The stand-in, plus a preload that allocates without end once it gets SIGUSR2: killed by the kernel at the
    // container's memory limit (the tests' tiers: 256 MiB), after it was running, so the self-healing restarts it.
    const preload = "process.on('SIGUSR2', () => { const held = []; setInterval(() => held.push(Buffer.alloc(32 << 20, 1)), 20); });";
    await standinVariant('t-obs-oom', {}, [
      'USER 0:0',
      `RUN printf '%s\\n' "${preload}" > /opt/agenthost/standin/oom.cjs && chmod 0644 /opt/agenthost/standin/oom.cjs`,
      'USER 10001:10001',
      'CMD ["/usr/local/bin/node", "--require", "/opt/agenthost/standin/oom.cjs", "/opt/agenthost/standin/agent.mjs"]',
    ]);
    const id = await running('t-obs-oom');
    await exec('docker', ['kill', '--signal', 'USR2', `agenthost-${id}`]);

    const status = await waitFor(
      'the OOM kill in the status',
      async () => {
        const r = await user.api.get(`/instance/status/${id}`);
        return r.body.oom_kills === 1 ? r.body : undefined;
      },
      60_000,
    );
    expect(status).toMatchObject({ last_exit_kind: 'oom_killed', last_exit_reason: 'killed: out of memory (limit 256 MiB)', memory_limit_mb: 256 });
    await waitFor('the OOM kill counted', async () => (await sample('agenthost_instance_oom_kills_total')) === before.kills + 1, 60_000);
    // Its exit counted as one (the kernel's SIGKILL, exit code 137, is not a stop).
    await waitFor('its exit counted as an OOM kill', async () => (await sample('agenthost_instance_exits_total', 'reason="oom"')) === before.exits + 1);
    // The crash's lifecycle event (JetStream, what GET /instance/events streams) says it was the OOM killer.
    const event = await waitFor('the oom_killed event', async () =>
      (await eventHistory<Record<string, unknown>>(nc, 'events.instance.status')).find((e) => e.instance_id === id && e.exit_kind === 'oom_killed'),
    );
    expect(event).toMatchObject({ status: 'provisioning', restarts: 0, exit_reason: 'killed: out of memory (limit 256 MiB)' });
    // Healed: running again, one restart, the OOM kill still on record.
    await waitFor(
      'restarted after the OOM kill',
      async () => {
        const r = await user.api.get(`/instance/status/${id}`);
        return r.body.status === 'running' && r.body.restarts === 1 && r.body.oom_kills === 1;
      },
      120_000,
    );
    // The usage metrics sum them over the user's instances (this is the only one left), with its live CPU and memory.
    const usage = await waitFor('the OOM kill in the usage metrics', async () => {
      const r = await user.api.get('/usage/metrics');
      return r.body.instances.oom_kills === 1 && r.body.instances.memory_usage_mb > 0 ? r.body.instances : undefined;
    });
    expect(usage).toMatchObject({ active: 1, restarts: 1, oom_kills: 1 });
    expect(usage.cpu_usage_percent).toBeGreaterThanOrEqual(0);
    expect((await user.api.del(`/instance/delete/${id}`)).status).toBe(200);
  });

  it('serves health and metrics on the operator port only', async () => {
    const ready = await get(ports.provisioner!, '/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ok: true, checks: { postgres: 'ok', nats: 'ok', docker: 'ok' } });
    expect((await get(ports.gateway!, '/livez')).status).toBe(200);
    expect(await (await get(ports.auth!, '/readyz')).json()).toEqual({ ok: true, checks: { postgres: 'ok', nats: 'ok' } });
    // The public port (the one the edge proxies) has no metrics.
    const base = stack.baseUrl.replace(/\/api$/, '');
    expect((await fetch(`${base}/metrics`)).status).toBe(404);
    expect((await fetch(`${base}/api/metrics`)).status).toBe(404);
  });

  it('$SRV.STATS counts the errors an endpoint answered', async () => {
    const stats = async () => {
      for await (const s of await nc.services.client().stats('provisioner')) {
        return s.endpoints?.find((e) => e.subject === 'provisioner.v1.instances.get');
      }
      return undefined;
    };
    const before = (await stats())!;
    expect((await user.api.get('/instance/status/00000000-0000-4000-8000-000000000001')).status).toBe(404);
    const after = (await stats())!;
    expect(after.num_errors).toBe(before.num_errors + 1);
    expect(after.num_requests).toBe(before.num_requests + 1);
    expect(after.last_error).toBe('404 INSTANCE_NOT_FOUND');
    expect(after.processing_time).toBeGreaterThan(before.processing_time);
  });

  it('no label value of any service names a user, wallet, instance or key', async () => {
    // One more instance with a named key stored and read through the keyvault, then every service's exposition.
    const id = await running();
    const keyName = 'OBSERVE_LABEL_CHECK_KEY';
    identifiers.add(keyName);
    expect((await user.api.post('/keys/store', { instance_id: id, keys: { [keyName]: 'not-a-real-secret' } })).status).toBe(200);
    expect((await user.api.get(`/keys/list?instance_id=${id}`)).status).toBe(200);
    expect((await user.api.get(`/instance/status/${id}`)).status).toBe(200);
    const values: string[] = [];
    for (const s of SERVICES) {
      const text = await (await get(ports[s]!, '/metrics')).text();
      for (const line of text.split('\n')) {
        if (line.startsWith('#')) continue;
        for (const m of line.matchAll(/="((?:[^"\\]|\\.)*)"/g)) values.push(m[1]!);
      }
    }
    expect(values.length).toBeGreaterThan(100);
    expect(identifiers.size).toBeGreaterThanOrEqual(6); // user, wallet, the instances of the tests above, the key
    for (const v of values) for (const ident of identifiers) expect(v.toLowerCase(), `label value ${v}`).not.toContain(ident.toLowerCase());
    await user.api.del(`/instance/delete/${id}`);
  });
});
