import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deploymentWithInstance, newWallet, type UserDeployment, waitFor } from '../../packages/testkit/src/index.ts';

// A single host (deploy/start.sh) while its Postgres is stopped: the reads the gateway has a last answer for, and the
// metered requests the quota blocks it holds cover, are still served; writes answer 503 in the error shape; and the
// requests served meanwhile are counted exactly once Postgres is back, through a clean restart and a SIGKILL of the
// gateway (whose unused quota comes back once its lease is stale).

let host: UserDeployment;
let api: string;
let instanceId: string;
/** X-Usage-Remaining of the last metered answer: each metered request answered takes exactly one. */
let remaining = -1;

const supervisorctl = (...args: string[]) => host.supervisorctl(...args);

interface Answer {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}
async function call(method: string, urlPath: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${api}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${host.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

/** A metered read that must be served: one less remaining than the last. */
async function served(urlPath: string): Promise<Answer> {
  const a = await call('GET', urlPath);
  expect(a.status, `${urlPath}: ${JSON.stringify(a.body)}`).toBe(200);
  const left = Number(a.headers.get('x-usage-remaining'));
  if (remaining >= 0) expect(left, `X-Usage-Remaining of ${urlPath}`).toBe(remaining - 1);
  remaining = left;
  return a;
}

const ready = async () => (await fetch(`${api}/health/ready`).catch(() => undefined))?.status === 200;

beforeAll(async () => {
  // The edge's ports and the instance ports are this suite's (18820-18829). Blocks stay with the replica while the
  // test pauses between requests (they would go back after 5 s idle).
  host = await deploymentWithInstance('outage', { edgeHttps: 18820, instancePorts: [18822, 18829], settings: ['USAGE_IDLE_RETURN_MS=600000'] });
  ({ api, instanceId } = host);
}, 600_000);

afterAll(async () => {
  await supervisorctl('start', 'postgres');
  await host?.stop();
}, 180_000);

describe('a single host while Postgres is stopped', () => {
  let status: Answer;
  let list: Answer;
  let one: Answer;

  it('serves the last known subscription status, instance list and instance status, and metered requests from the blocks it holds', async () => {
    status = await served('/subscription/status');
    one = await served(`/instance/status/${instanceId}`);
    // Enough requests that the gateway holds a block of the day's quota beyond them.
    for (let i = 0; i < 30; i++) list = await served('/instance/list');
    await supervisorctl('stop', 'postgres');
    expect(await supervisorctl('status', 'postgres')).toMatch(/STOPPED/);

    const s = await served('/subscription/status');
    expect(s.body).toMatchObject({ tier: 'pro', is_active: true, wallet_address: status.body.wallet_address });
    const l = await served('/instance/list');
    expect(l.body).toEqual(list.body);
    expect(Number(l.headers.get('age'))).toBeGreaterThanOrEqual(0);
    const o = await served(`/instance/status/${instanceId}`);
    // The answer last read, live figures included (as of its Age).
    expect(o.body).toEqual(one.body);
    expect(o.body).toMatchObject({ instance_id: instanceId, status: 'running' });
    for (let i = 0; i < 5; i++) await served('/instance/list');
  }, 120_000);

  it('answers writes with 503 SERVICE_UNAVAILABLE in the error shape, with Retry-After', async () => {
    const create = await call('POST', '/instance/create', { framework: 'openclaw' });
    expect(create.status).toBe(503);
    expect(create.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
    expect(typeof create.body.error).toBe('string');
    expect(Number(create.headers.get('retry-after'))).toBeGreaterThan(0);
    // Admitted, so counted like any metered request (from the block held), though the backend could not act on it.
    expect(Number(create.headers.get('x-usage-remaining'))).toBe(remaining - 1);
    remaining--;
    const nonce = await fetch(`${api}/auth/nonce?wallet_address=${newWallet().address}`);
    expect(nonce.status).toBe(503);
    expect(await nonce.json()).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
  }, 60_000);

  it('counts every request it served once Postgres is back: through a clean restart of the gateway, and a SIGKILL', async () => {
    await supervisorctl('start', 'postgres');
    await waitFor('the platform ready again', ready, 60_000, 250);
    await served('/instance/list');
    // A clean restart writes what it counted and gives back what it held: the next replica starts from the database.
    await supervisorctl('restart', 'gateway');
    await waitFor('the gateway ready again', ready, 60_000, 250);
    await served('/instance/list');
    // A SIGKILL leaves its unused block leased until the lease is stale (USAGE_LEASE_TTL_SECONDS): then it comes back,
    // and what remains is exactly the quota minus every request answered.
    const pid = Number(await supervisorctl('pid', 'gateway'));
    process.kill(pid, 'SIGKILL');
    await waitFor('the gateway back', async () => Number(await supervisorctl('pid', 'gateway')) !== pid && (await ready()), 60_000, 250);
    const expected = remaining;
    let probes = 0;
    await waitFor(
      "the killed gateway's unused quota back",
      async () => {
        const a = await call('GET', '/instance/list');
        expect(a.status).toBe(200);
        probes++;
        return Number(a.headers.get('x-usage-remaining')) === expected - probes;
      },
      60_000,
      500,
    );
  }, 180_000);
});
