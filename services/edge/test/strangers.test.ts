import { execFile } from 'node:child_process';
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSecret, signIn, subscribe, waitFor, type Edge, type Session, type Stack, cleanupDocker, testNetwork } from '@agenthost/testkit';
import { sleepStack } from './sleep-stack.ts';

// Only an instance's owner wakes it or keeps it awake: anyone who knows (or guesses) its id reaches its agent while it
// runs, but is not counted as its traffic, and gets the same answer as for an id that is no instance otherwise. The
// stand-in agent behind the real edge, the provisioner on the real engine, a real Chromium for the dashboard's link.
// Ports of this suite: instances 18730-18733, the edge 18744 (HTTPS) and 18734 (HTTP).
const HTTPS = 18744;
const IDLE = 4;
const network = testNetwork('strangers');

let stack: Stack;
let edge: Edge;
let owner: Session;
let inst: { id: string; url: string; token: string };
let unknownUrl: string;

const view = async (id: string) => (await owner.api.get(`/instance/status/${id}`)).body as { status: string };
/** The provisioner's record of the instance's last traffic (what the edge reports; idle sleep counts from it). */
const trafficAt = async (id: string): Promise<number | null> => {
  if (!/^inst-[0-9a-f]+$/.test(id)) throw new Error('not an instance id');
  const sql = `select floor(extract(epoch from traffic_at) * 1000) from provisioner.instances where id = '${id}'`;
  const out = (await promisify(execFile)('psql', [stack.db.url, '-Atc', sql])).stdout.trim();
  return out === '' ? null : Number(out);
};
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
/** How a WebSocket opening through the edge ends: the upgrade, or the refusal's status line. */
const upgrade = (url: string, headers: Record<string, string> = {}) =>
  edge.websocket(url, headers).then(
    (ws) => (ws.close(), 'upgraded'),
    (err: Error) => err.message,
  );

beforeAll(async () => {
  await cleanupDocker(network);
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18730, 18733],
    edgePorts: { https: HTTPS, http: 18734 },
    idle: { pro: IDLE },
    edge: { EDGE_WAKE_TIMEOUT_SECONDS: '45' },
  }));
  owner = await signIn(stack.api);
  await subscribe(stack, owner, { tier: 'pro' });
  const c = await owner.api.post('/instance/create', { framework: 'openclaw', name: 'owned' });
  expect(c.status, c.text).toBe(200);
  recordSecret(c.body.access_token);
  inst = { id: c.body.instance_id, url: c.body.url, token: c.body.access_token };
  unknownUrl = inst.url.replace(inst.id, `inst-${randomBytes(10).toString('hex')}`);
  await waitFor('running', async () => (await view(inst.id)).status === 'running', 60_000, 250);
}, 240_000);

afterAll(async () => {
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

describe("a stranger's traffic", () => {
  it('reaches a running agent but does not keep it awake: it sleeps while a stranger keeps sending requests', async () => {
    // The owner's request first: it wakes the instance if it slept already, and its idle time counts from here.
    const first = await edge.request(`${inst.url}/`, { headers: bearer(inst.token) });
    expect(first.json).toMatchObject({ agent: 'standin', instance_id: inst.id });
    const from = Date.now();
    // A WebSocket of a stranger, open all along, and requests without a token or with a wrong one, until it sleeps.
    const ws = await edge.websocket(`${inst.url}/ws`);
    expect(JSON.parse(await ws.receive())).toEqual({ hello: inst.id });
    let answered = 0;
    await waitFor(
      'asleep under a stranger',
      async () => {
        const r = await edge.request(`${inst.url}/`, { headers: answered % 2 ? bearer('not-the-token') : {} });
        if (r.status === 200) answered++;
        return (await view(inst.id)).status === 'sleeping';
      },
      60_000,
      200,
    );
    // The agent answered the stranger for longer than the idle time, and the last traffic recorded is the owner's
    // request (reported within the edge's one-second period), none of the stranger's.
    expect(Date.now() - from).toBeGreaterThan(IDLE * 1000);
    expect(answered).toBeGreaterThan(IDLE);
    expect(await trafficAt(inst.id)).toBeLessThan(from + 2000);
    ws.close();
  }, 90_000);

  it('does not wake a sleeping instance, and gets the answer an unknown id gets, over HTTP and WebSocket', async () => {
    expect((await view(inst.id)).status).toBe('sleeping');
    const tries: Array<Record<string, string>> = [
      {},
      bearer('not-the-token'),
      bearer(inst.token.slice(1)),
      { accept: 'text/html' },
      { cookie: '__Host-agenthost-session=9999999999.x' },
    ];
    for (const headers of tries) {
      const [asleep, unknown] = await Promise.all([edge.request(`${inst.url}/`, { headers }), edge.request(`${unknownUrl}/`, { headers })]);
      expect(asleep.status).toBe(404);
      expect([asleep.status, asleep.text, asleep.headers['content-type']]).toEqual([unknown.status, unknown.text, unknown.headers['content-type']]);
    }
    const [wsAsleep, wsUnknown] = await Promise.all([upgrade(`${inst.url}/ws`), upgrade(`${unknownUrl}/ws`)]);
    expect(wsAsleep).toMatch(/^no upgrade: HTTP\/1.1 404/);
    expect(wsAsleep).toBe(wsUnknown);
    // Each was answered at once, none woke it.
    expect((await view(inst.id)).status).toBe('sleeping');
  });
});

describe("the owner's traffic", () => {
  let cookie = '';

  it('wakes it with the token, is answered by the agent, and starts a session on the instance host', async () => {
    expect((await view(inst.id)).status).toBe('sleeping');
    const r = await edge.request(`${inst.url}/`, { headers: bearer(inst.token) });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ agent: 'standin', instance_id: inst.id });
    expect((await view(inst.id)).status).toBe('running');
    const set = [r.headers['set-cookie'] ?? []].flat().find((c) => c.startsWith('__Host-agenthost-session='));
    expect(set).toMatch(/; Path=\/; Max-Age=\d+; Secure; HttpOnly; SameSite=Strict$/);
    cookie = set!.split(';')[0]!;
    recordSecret(cookie.split('=')[1]!);
    // The keeper's own headers stay between Caddy and the keeper.
    expect(Object.keys(r.headers).filter((h) => h.startsWith('x-agenthost'))).toEqual([]);
  });

  it("keeps it awake over a WebSocket that carries only the session, as the Control UI's does", async () => {
    const ws = await edge.websocket(`${inst.url}/ws`, { cookie });
    expect(JSON.parse(await ws.receive())).toEqual({ hello: inst.id });
    const opened = Date.now();
    // The open connection is reported again and again while it stays open, and the instance stays running.
    await waitFor('traffic recorded after the opening', async () => ((await trafficAt(inst.id)) ?? 0) > opened + 2000, 20_000, 500);
    expect((await view(inst.id)).status).toBe('running');
    ws.send('still here');
    expect(await ws.receive()).toBe('still here');
    ws.close();
  });

  it('wakes it with the session alone (the page and assets of the Control UI carry no token)', async () => {
    await waitFor('sleeping again', async () => (await view(inst.id)).status === 'sleeping', 45_000, 250);
    const r = await edge.request(`${inst.url}/`, { headers: { cookie } });
    expect(r.json).toMatchObject({ agent: 'standin', instance_id: inst.id });
    // With its headers on a failure: once in CI this read said sleeping right after the wake (an Age header would
    // say the gateway answered what it kept from before, the provisioner being unavailable).
    const after = await owner.api.get(`/instance/status/${inst.id}`);
    expect(after.body.status, JSON.stringify({ headers: Object.fromEntries(after.headers), body: after.body })).toBe('running');
  });
});

describe('the dashboard link <url>/#token=… in Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    const spki = (file: string) =>
      createHash('sha256')
        .update(new X509Certificate(readFileSync(file)).publicKey.export({ type: 'spki', format: 'der' }))
        .digest('base64');
    const ca = edge.caFile.replace(/root\.crt$/, '');
    browser = await puppeteer.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', `--ignore-certificate-errors-spki-list=${[spki(`${ca}root.crt`), spki(`${ca}intermediate.crt`)].join(',')}`],
    });
  });
  afterAll(async () => browser?.close());

  const open = async (hash: string) => {
    const page = await (await browser.createBrowserContext()).newPage();
    await page.goto(`${inst.url}/${hash}`, { waitUntil: 'domcontentloaded' });
    return page;
  };

  it('shows a stranger (no token in the link) the page an unknown id gets, and does not wake the instance', async () => {
    await waitFor('sleeping again', async () => (await view(inst.id)).status === 'sleeping', 45_000, 250);
    const page = await open('');
    const other = await (await browser.createBrowserContext()).newPage();
    await other.goto(`${unknownUrl}/`, { waitUntil: 'domcontentloaded' });
    expect(await page.$eval('#m', (e) => e.textContent)).toBe(await other.$eval('#m', (e) => e.textContent));
    // The page's script has run (it stops at once without a token): nothing was woken.
    expect((await view(inst.id)).status).toBe('sleeping');
    await page.browserContext().close();
    await other.browserContext().close();
  });

  it("wakes a sleeping instance for its owner's link and then shows the agent's own page", async () => {
    expect((await view(inst.id)).status).toBe('sleeping');
    const page = await open(`#token=${encodeURIComponent(inst.token)}`);
    // A failure says what the page last showed (its script writes why it stopped into #m) and the instance's state.
    await waitFor(
      'the agent in the page',
      async () => {
        const html = await page.content().catch((err: Error) => `(no content: ${err.message})`);
        if (html.includes('"agent":"standin"')) return true;
        throw new Error(
          `the page shows ${JSON.stringify(html.replace(/<script>[\s\S]*<\/script>/, '').slice(-300))}; the instance is ${(await view(inst.id)).status}`,
        );
      },
      60_000,
      250,
    );
    expect((await view(inst.id)).status).toBe('running');
    await page.browserContext().close();
  }, 90_000);
});
