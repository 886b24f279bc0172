import { setTimeout as sleep } from 'node:timers/promises';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkoutVariant,
  signIn,
  startEdge,
  startStack,
  subscribe,
  waitFor,
  type Edge,
  type Session,
  type Stack,
  cleanupDocker,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
} from '@agenthost/testkit';

// Ports of this suite: instances 18700-18709, the edge 18740 (HTTPS), 18741 (HTTP) and 18748 (the instances' listener).
const HTTPS = 18740;
const HTTP = 18741;
const INSTANCES = 18748;
const READ_TIMEOUT_SECONDS = 3;
const network = testNetwork('edge');

let stack: Stack;
let edge: Edge;
let owner: Session;

const shape = { error: expect.any(String), code: expect.any(String), status: expect.any(Number) };

/** A call to the API through the edge, as a client on the internet makes it. */
const api = (method: string, path: string, body?: unknown, token = owner.token) =>
  edge.request(`${edge.origin}/api${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

const statusOf = async (id: string) => (await api('GET', `/instance/status/${id}`)).json.status;
/** A create through the edge; a 503 (a loaded engine on this shared machine) is retried, as a client would. */
const create = (name: string) =>
  waitFor(
    `create ${name}`,
    async () => {
      const c = await api('POST', '/instance/create', { framework: 'openclaw', name });
      if (c.status === 503) return undefined;
      return c;
    },
    60_000,
    1000,
  );
const createRunning = async (name: string) => {
  const c = await create(name);
  expect(c.status, c.text).toBe(200);
  const id = c.json.instance_id as string;
  await waitFor(`${id} running`, async () => (await statusOf(id)) === 'running', 60_000, 250);
  return { id, url: c.json.url as string };
};

beforeAll(async () => {
  await cleanupDocker(network);
  // This checkout's stand-in agent (it has the WebSocket echo).
  const version = await checkoutVariant('agenthost/standin', 'edge', [{ from: 'deploy/images/standin/agent.mjs', to: '/opt/agenthost/standin/agent.mjs' }]);
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: {
      provisioner: provisionerEnv({
        network,
        ports: [18700, 18709],
        extra: { INSTANCE_URL_TEMPLATE: `https://{id}.agenthost.localhost:${HTTPS}`, DEFAULT_VERSION: version },
      }),
      gateway: gatewayEnv,
    },
  });
  // A short read timeout: the WebSocket test shows that an upgraded connection outlives it.
  edge = await startEdge(stack, {
    httpsPort: HTTPS,
    httpPort: HTTP,
    env: { EDGE_READ_TIMEOUT_SECONDS: String(READ_TIMEOUT_SECONDS), EDGE_INSTANCE_PORT: String(INSTANCES) },
  });
  owner = await signIn(stack.api);
  await subscribe(stack, owner, { tier: 'pro' });
}, 180_000);

afterAll(async () => {
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

describe('the API through the HTTPS edge', () => {
  it('keeps the error shape of every API error, and the subscription headers', async () => {
    const noToken = await api('GET', '/subscription/status', undefined, 'not-a-token');
    expect(noToken.status).toBe(401);
    expect(noToken.json).toEqual({ ...shape, code: 'UNAUTHORIZED', status: 401 });
    const badJson = await edge.request(`${edge.origin}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"wallet_address":',
    });
    expect(badJson.json).toEqual({ ...shape, code: 'INVALID_JSON', status: 400 });
    const missing = await api('GET', '/instance/status/inst-00000000000000000000');
    expect(missing.json).toEqual({ ...shape, code: 'INSTANCE_NOT_FOUND', status: 404 });
    const ok = await api('GET', '/subscription/status');
    expect(ok.status).toBe(200);
    expect(ok.headers['x-subscription-tier']).toBe('pro');
    expect(ok.headers['strict-transport-security']).toMatch(/max-age=\d+/);
    // Over the gateway's body limit (64 KiB) and over the edge's own (1 MiB): both answer 413 in the same shape.
    for (const size of [100_000, 2_000_000]) {
      const big = await api('POST', '/keys/store', { instance_id: 'inst-x', keys: { BIG: 'x'.repeat(size) } });
      expect(big.status, `${size} bytes`).toBe(413);
      expect(big.json).toEqual({ ...shape, code: 'PAYLOAD_TOO_LARGE', status: 413 });
    }
  });

  it('redirects plain HTTP to HTTPS on the same host and port', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http.get({ host: '127.0.0.1', port: HTTP, path: '/api/health/live?x=1', headers: { host: `agenthost.localhost:${HTTP}` } }, resolve).on('error', reject),
    );
    res.resume();
    expect(res.statusCode).toBe(308);
    expect(res.headers.location).toBe(`https://agenthost.localhost:${HTTPS}/api/health/live?x=1`);
  });

  it('refuses the routes only instances call (keys retrieval, key watch), which the gateway serves on their network', async () => {
    const creds = { 'x-instance-id': 'inst-00000000000000000000', 'x-instance-secret': 'guess' };
    for (const path of ['/api/keys/retrieve', '/api/keys/watch', '/API/Keys/Retrieve', '/api/keys/list/../retrieve']) {
      const res = await edge.request(`${edge.origin}${path}`, { headers: creds });
      expect(res.status, path).toBe(404);
      expect(res.json).toEqual({ ...shape, code: 'NOT_FOUND', status: 404 });
    }
    // The gateway itself does serve it (to instances): there the same call is judged on its credentials.
    const direct = await fetch(`${stack.baseUrl}/keys/retrieve`, { headers: creds });
    expect(direct.status).toBe(401);
  });

  it('answers an unknown instance host in the API error shape, and serves the dashboard at the domain', async () => {
    const unknown = await edge.request(`https://inst-0000000000000000dead.agenthost.localhost:${HTTPS}/`);
    expect(unknown.json).toEqual({ ...shape, code: 'INSTANCE_NOT_FOUND', status: 404 });
    const dashboard = await edge.request(`${edge.origin}/`);
    expect(dashboard.status).toBe(200);
    expect(dashboard.text).toMatch(/<html/i);
    // A path that is neither the API nor a dashboard file: the gateway's 404 in the API's shape.
    const other = await edge.request(`${edge.origin}/no-such-page.php`);
    expect(other.json).toEqual({ ...shape, code: 'NOT_FOUND', status: 404 });
  });

  it("serves the instances' own listener in the API's error shape: the keys routes, and a body too large", async () => {
    const plain = (path: string, init: RequestInit = {}) =>
      fetch(`http://127.0.0.1:${INSTANCES}${path}`, init).then(async (r) => ({ status: r.status, json: await r.json() }));
    // There the keys routes reach the gateway, which judges the instance's credentials.
    const retrieve = await plain('/api/keys/retrieve', { headers: { 'x-instance-id': 'inst-00000000000000000000', 'x-instance-secret': 'guess' } });
    expect(retrieve).toEqual({ status: 401, json: { ...shape, code: 'INSTANCE_UNAUTHORIZED', status: 401 } });
    expect(await plain('/')).toEqual({ status: 404, json: { ...shape, code: 'NOT_FOUND', status: 404 } });
    const big = await plain('/api/keys/store', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ BIG: 'x'.repeat(2_000_000) }),
    });
    expect(big).toEqual({ status: 413, json: { ...shape, code: 'PAYLOAD_TOO_LARGE', status: 413 } });
  });
});

describe('instances at their https URL', () => {
  it('answers once running, and a clear error at once when stopped or deleted', async () => {
    const c = await create('edge-lifecycle');
    expect(c.status, c.text).toBe(200);
    const id = c.json.instance_id as string;
    expect(c.json.url).toBe(`https://${id}.agenthost.localhost:${HTTPS}`);
    expect(c.json.port).toEqual(expect.any(Number));
    const url = c.json.url as string;
    // The owner's requests (its token) learn the instance's state; anyone else's get the unknown id's answer.
    const owns = { headers: { authorization: `Bearer ${c.json.access_token as string}` } };
    // While it starts: 503 with Retry-After (unless it is already running), never a hang.
    const early = await edge.request(`${url}/`, owns);
    if (early.status !== 200) {
      expect(early.json).toEqual({ ...shape, code: 'INSTANCE_STARTING', status: 503 });
      expect(early.headers['retry-after']).toBe('2');
    }
    await waitFor('running', async () => (await statusOf(id)) === 'running', 60_000, 250);
    const up = await waitFor('the instance through the edge', async () => {
      const r = await edge.request(`${url}/`);
      return r.status === 200 && r.json;
    });
    expect(up).toMatchObject({ agent: 'standin', instance_id: id });

    expect((await api('POST', `/instance/stop/${id}`)).status).toBe(200);
    const stopped = await waitFor('the stopped answer', async () => {
      const r = await edge.request(`${url}/`, owns);
      return r.json.code === 'INSTANCE_STOPPED' && r;
    });
    expect(stopped.status).toBe(503);
    expect(stopped.json).toEqual({ ...shape, code: 'INSTANCE_STOPPED', status: 503 });
    expect((await edge.request(`${url}/`)).json).toEqual({ ...shape, code: 'INSTANCE_NOT_FOUND', status: 404 });

    expect((await api('POST', `/instance/start/${id}`)).status).toBe(200);
    await waitFor('running again through the edge', async () => (await edge.request(`${url}/`)).status === 200, 60_000, 250);

    expect((await api('DELETE', `/instance/delete/${id}`)).status).toBe(200);
    const gone = await waitFor('the deleted answer', async () => {
      const r = await edge.request(`${url}/`);
      return r.json.code === 'INSTANCE_NOT_FOUND' && r;
    });
    expect(gone.status).toBe(404);
  });

  it('carries a WebSocket to the instance, which stays open while other instances come and go', async () => {
    const { id, url } = await createRunning('edge-ws');
    await waitFor('the route of the running instance', async () => (await edge.request(`${url}/`)).status === 200);
    const ws = await edge.websocket(`${url}/ws`);
    const opened = Date.now();
    expect(JSON.parse(await ws.receive())).toEqual({ hello: id });
    ws.send('ping through the edge');
    expect(await ws.receive()).toBe('ping through the edge');
    // Another instance is created, runs and is deleted meanwhile: routes change, this connection does not.
    const other = await createRunning('edge-ws-other');
    expect((await api('DELETE', `/instance/delete/${other.id}`)).status).toBe(200);
    // Past the edge's read timeout (which bounds reading a request, not an upgraded connection's life).
    await sleep(Math.max(0, (READ_TIMEOUT_SECONDS + 1) * 1000 - (Date.now() - opened)));
    ws.send('still here');
    expect(await ws.receive()).toBe('still here');
    ws.close();
    await api('DELETE', `/instance/delete/${id}`);
  });

  it('gives instances created while the edge was down their routes once it is back', async () => {
    await edge.keeper.stop();
    await edge.stopCaddy();
    // Created through the gateway directly: the edge is down.
    const c = await waitFor(
      'create while the edge is down',
      async () => {
        const r = await owner.api.post('/instance/create', { framework: 'openclaw', name: 'edge-while-down' });
        return r.status !== 503 && r;
      },
      60_000,
      1000,
    );
    expect(c.status, c.text).toBe(200);
    const id = c.body.instance_id as string;
    await waitFor('running', async () => (await owner.api.get(`/instance/status/${id}`)).body.status === 'running', 60_000, 250);
    // Caddy is back but its route keeper is not: a clear answer, not a hang.
    await edge.startCaddy();
    const meanwhile = await edge.request(`${c.body.url as string}/`);
    expect(meanwhile.json).toEqual({ ...shape, code: 'SERVICE_UNAVAILABLE', status: 503 });
    expect(meanwhile.headers['retry-after']).toBe('1');
    await edge.keeper.start();
    const back = await waitFor('the route rebuilt from the table', async () => {
      const r = await edge.request(`${c.body.url as string}/`);
      return r.status === 200 && r.json;
    });
    expect(back).toMatchObject({ agent: 'standin', instance_id: id });
    await api('DELETE', `/instance/delete/${id}`);
  });
});
