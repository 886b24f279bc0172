import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiClient,
  gatewayUrl,
  signIn,
  startStack,
  subscribe,
  waitFor,
  type ApiClient,
  type ServiceProcess,
  type Session,
  type Stack,
} from '@agenthost/testkit';

// Gateway replicas killed with SIGKILL while holding quota blocks: what they leased and did not serve
// goes back once USAGE_LEASE_TTL_SECONDS has passed, so the day's count equals the requests answered
// (killed gateways included), only the requests in flight on the killed process fail, and the daily
// limit is never exceeded across a kill.

const TTL_SECONDS = 2;
const SMALL = 60;
let stack: Stack;
let admin: pg.Client;

beforeAll(async () => {
  stack = await startStack({
    services: ['auth', 'billing-chain'],
    devchain: true,
    env: {
      TIER_LIMITS_JSON: JSON.stringify({
        pro: { requests_per_day: 100_000, requests_per_minute: 100_000 },
        free: { requests_per_day: SMALL, requests_per_minute: 100_000 },
      }),
    },
    serviceEnv: { 'billing-chain': { BACKGROUND_JOBS: 'false' }, gateway: { USAGE_LEASE_TTL_SECONDS: String(TTL_SECONDS), USAGE_IDLE_RETURN_MS: '600000' } },
  });
  admin = new pg.Client({ connectionString: stack.db.url });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  await stack?.stop();
});

async function subscriber(tier: 'pro' | 'free'): Promise<Session> {
  const s = await signIn(stack.api);
  await subscribe(stack, s, { tier });
  return s;
}

/** The day's counter of a user as the database has it (requests granted to replicas and not given back). */
async function usedToday(userId: string): Promise<number> {
  const r = await admin.query<{ used: string }>(
    `select used from gateway.usage_counters where user_id = $1 and "window" = 'day' and window_start = date_trunc('day', now() at time zone 'utc') at time zone 'utc'`,
    [userId],
  );
  return Number(r.rows[0]?.used ?? 0);
}

/** The day's counter less what live replicas hold unused: the requests counted. */
async function countedToday(userId: string): Promise<number> {
  const r = await admin.query<{ held: string }>(
    `select coalesce(sum(granted - served), 0) as held from gateway.usage_leases where user_id = $1 and "window" = 'day'`,
    [userId],
  );
  return (await usedToday(userId)) - Number(r.rows[0]?.held ?? 0);
}

/** Every replica but the stack's first one has been reclaimed (or never was). */
async function onlySurvivorLeft(): Promise<boolean> {
  const r = await admin.query<{ n: string }>(`select count(*) as n from gateway.usage_replicas`);
  return Number(r.rows[0]?.n) <= 1;
}

/** One more gateway replica to kill (the stack's first one stays up: the survivors reclaim). */
async function victim(label: string): Promise<{ proc: ServiceProcess; client: (s: Session) => ApiClient }> {
  const proc = await stack.addReplica('gateway', label);
  return { proc, client: (s) => apiClient(gatewayUrl(proc), s.token) };
}

const statusOf = async (c: ApiClient): Promise<number | 'failed'> => {
  try {
    return (await c.get('/subscription/status')).status;
  } catch {
    return 'failed'; // the connection died with the process
  }
};

describe('a gateway killed with SIGKILL', () => {
  it('gives back its unused block: the day counts exactly the requests that got a 2xx', async () => {
    const s = await subscriber('pro');
    const v = await victim('gateway-killed-idle');
    const api = v.client(s);
    let ok = 0;
    for (let wave = 0; wave < 4; wave++) {
      const rs = await Promise.all(Array.from({ length: 10 }, () => statusOf(api)));
      ok += rs.filter((r) => r === 200).length;
    }
    expect(ok).toBe(40);
    expect(await usedToday(s.user_id)).toBeGreaterThan(40); // the victim holds a block
    await v.proc.kill();
    await waitFor('the killed gateway reclaimed', onlySurvivorLeft, 20_000, 100);
    expect(await usedToday(s.user_id)).toBe(ok);
    // The survivor counts on from there.
    const after = await s.api.get('/usage/metrics');
    expect(after.status).toBe(200);
    expect(after.body.requests.used).toBe(ok + 1);
  });

  it('under load: only requests in flight on the killed process fail, and the count stays exact', async () => {
    const s = await subscriber('pro');
    const v = await victim('gateway-killed-busy');
    const clients = [v.client(s), s.api];
    let stop = false;
    const tally = { ok: 0, okVictim: 0, failedVictim: 0, other: [] as Array<number | 'failed'> };
    const workers = Array.from({ length: 8 }, async (_, i) => {
      const onVictim = i % 2 === 0;
      while (!stop) {
        const r = await statusOf(clients[i % 2]!);
        if (r === 200) {
          tally.ok++;
          if (onVictim) tally.okVictim++;
        } else if (r === 'failed' && onVictim) {
          tally.failedVictim++;
          break; // that worker's gateway is gone
        } else tally.other.push(r);
      }
    });
    await waitFor('requests answered by the victim', async () => tally.okVictim >= 200, 30_000, 20);
    await v.proc.kill();
    const okAtKill = tally.ok;
    await waitFor('more requests answered by the survivor', async () => tally.ok >= okAtKill + 200, 30_000, 20);
    stop = true;
    await Promise.all(workers);
    expect(tally.other).toEqual([]);
    // One request per victim worker was in flight at most.
    expect(tally.failedVictim).toBeLessThanOrEqual(4);
    await waitFor('the killed gateway reclaimed', onlySurvivorLeft, 20_000, 100);
    const used = await countedToday(s.user_id);
    // A request whose count was written but whose answer died with the process is counted: it was made.
    expect(used).toBeGreaterThanOrEqual(tally.ok);
    expect(used).toBeLessThanOrEqual(tally.ok + tally.failedVictim);
  });

  it('never lets the daily limit be passed across a kill, and the killed block comes back', async () => {
    const s = await subscriber('free');
    const v = await victim('gateway-killed-limit');
    const api = v.client(s);
    let ok = 0;
    for (let i = 0; i < 10; i++) if ((await statusOf(api)) === 200) ok++;
    expect(ok).toBe(10);
    const held = await usedToday(s.user_id);
    expect(held).toBeGreaterThan(10);
    await v.proc.kill();
    // Before the TTL the victim's block is still counted: the survivor cannot pass the limit.
    const before = await Promise.all(Array.from({ length: 2 * SMALL }, () => s.api.get('/subscription/status')));
    const ok1 = before.filter((r) => r.status === 200).length;
    expect(before.every((r) => r.status === 200 || r.status === 403)).toBe(true);
    expect(ok1).toBeLessThanOrEqual(SMALL - held);
    await waitFor('the killed gateway reclaimed', onlySurvivorLeft, 20_000, 100);
    // After it, exactly the rest of the day's quota is served, and not one more.
    const after = await Promise.all(Array.from({ length: 2 * SMALL }, () => s.api.get('/subscription/status')));
    const ok2 = after.filter((r) => r.status === 200).length;
    expect(after.every((r) => r.status === 200 || r.status === 403)).toBe(true);
    expect(10 + ok1 + ok2).toBe(SMALL);
    expect(await usedToday(s.user_id)).toBe(SMALL);
  });
});
