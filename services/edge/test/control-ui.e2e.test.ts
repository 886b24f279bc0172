import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkoutVariant,
  signIn,
  startEdge,
  startStack,
  subscribe,
  waitFor,
  type ApiResponse,
  type Edge,
  type EdgeResponse,
  type Session,
  type Stack,
  documentValidator,
  cleanupDocker,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
} from '@agenthost/testkit';

// A real browser (Debian's chromium) opens the Control UI of real OpenClaw instances at their https URLs.
// Ports of this suite: instances 18710-18714, the edge 18742 (HTTPS) and 18743 (HTTP).
const HTTPS = 18742;
const exec = promisify(execFile);
const network = testNetwork('edge-ui');

let stack: Stack;
let edge: Edge;
let owner: Session;
let browser: Browser;
const instances: Array<{ id: string; url: string; token: string }> = [];

/** base64 SHA-256 of a certificate's public key, as Chromium's --ignore-certificate-errors-spki-list takes it. */
const spki = (file: string) =>
  createHash('sha256')
    .update(new X509Certificate(readFileSync(file)).publicKey.export({ type: 'spki', format: 'der' }))
    .digest('base64');

// Device calls run OpenClaw's CLI in the agent: the gateway allows them 70 s (routes/devices.ts), and a loaded CI
// host took more than 15 s for one.
const api = (method: string, path: string, body?: unknown) =>
  edge.request(`${edge.origin}/api${path}`, {
    method,
    timeoutMs: 75_000,
    headers: { authorization: `Bearer ${owner.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/**
 * Open the Control UI with the token in the fragment. Chromium aborts a navigation when the host's interfaces
 * change (ERR_NETWORK_CHANGED: other suites make and remove Docker networks): tried again. Errors never carry the URL
 * (it holds the token).
 */
async function openWithToken(page: Page, url: string, token: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.goto(`${url}/#token=${encodeURIComponent(token)}`, { waitUntil: 'domcontentloaded' });
      return;
    } catch (err) {
      const reason = /net::[A-Z_]+/.exec((err as Error).message)?.[0] ?? 'navigation failed';
      if (reason !== 'net::ERR_NETWORK_CHANGED' || attempt === 5) throw new Error(`opening ${url}: ${reason}`);
    }
  }
}

/** A page in its own browser profile that records every WebSocket frame the Control UI receives. */
async function openControlUi(url: string, token: string): Promise<{ page: Page; frames: string[]; refused: () => boolean }> {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  const frames: string[] = [];
  // Answers of the instance that refuse the browser's credentials (its UI's config endpoint checks the token too).
  const refusals: number[] = [];
  page.on('response', (r) => {
    if (r.url().startsWith(url) && (r.status() === 401 || r.status() === 403)) refusals.push(r.status());
  });
  const cdp = await page.createCDPSession();
  await cdp.send('Network.enable');
  cdp.on('Network.webSocketFrameReceived', (e: { response: { payloadData: string } }) => frames.push(e.response.payloadData));
  // The fragment never reaches a server or a log (OpenClaw's documented hand-off of the gateway token).
  await openWithToken(page, url, token);
  return { page, frames, refused: () => refusals.length > 0 };
}

const seen = (frames: string[], re: RegExp) => frames.some((f) => re.test(f));

/**
 * The pairing calls' answers checked against the OpenAPI document as the gateway serves it (the contract test's
 * validator): only a real OpenClaw answers them with success, so the contract test leaves their successes to this suite.
 */
async function expectDocumented(operationId: string, r: EdgeResponse): Promise<void> {
  const v = documentValidator((await api('GET', '/openapi.json')).json);
  const o = v.operations.find((x) => x.operationId === operationId)!;
  const headers = new Headers(
    Object.entries(r.headers).flatMap(([k, h]) => (h === undefined ? [] : [[k, Array.isArray(h) ? h.join(', ') : h] as [string, string]])),
  );
  expect(v.answer(o, { status: r.status, body: r.json, text: r.text, headers } as unknown as ApiResponse)).toEqual([]);
}

/** The owner's view of the instance's pairing, through the edge. */
const devicesOf = async (id: string) => {
  const r = await api('GET', `/instance/devices/${id}`);
  expect(r.status, r.text).toBe(200);
  await expectDocumented('listDevices', r);
  return r.json as { pending: Array<Record<string, unknown>>; paired: Array<Record<string, unknown>> };
};

/** A failed wait, with what the browser received and the instance's last log lines (the token masked). */
async function explained(err: Error, frames: string[], id: string, token: string): Promise<never> {
  const all = (await exec('docker', ['logs', '--tail', '30', `agenthost-${id}`], { timeout: 30_000 })).stdout;
  const frameText = frames.map((f) => f.slice(0, 300)).join(' | ');
  throw new Error(`${err.message}; frames ${frameText.replaceAll(token, '<token>')}; ${id}'s last log lines:\n${all.replaceAll(token, '<token>')}`);
}

/** Waits for a pending pairing request from the browser that received `frames`, and returns it as the API shows it. */
const pendingRequest = (id: string, frames: string[], token: string) =>
  waitFor('a pairing request of the browser', async () => (await devicesOf(id)).pending[0], 90_000, 1000).catch((err: Error) =>
    explained(err, frames, id, token),
  );

beforeAll(async () => {
  await cleanupDocker(network);
  // This checkout's launcher (it allows the instance's public origin).
  const version = await checkoutVariant('agenthost/openclaw', 'edge-ui', [
    { from: 'deploy/images/openclaw/launch.mjs', to: '/opt/agenthost/openclaw/launch.mjs' },
  ]);
  const env = provisionerEnv({
    network,
    ports: [18710, 18714],
    extra: { INSTANCE_URL_TEMPLATE: `https://{id}.agenthost.localhost:${HTTPS}`, READY_TIMEOUT_SECONDS: '240', DEFAULT_VERSION: version },
  });
  // The real OpenClaw image and the tiers' real resources.
  delete env.FRAMEWORK_IMAGES;
  delete env.TIER_LIMITS_JSON;
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: { provisioner: env, gateway: gatewayEnv },
  });
  edge = await startEdge(stack, { httpsPort: HTTPS, httpPort: 18743 });
  owner = await signIn(stack.api);
  await subscribe(stack, owner, { tier: 'pro' });
  for (const name of ['ui-a', 'ui-b']) {
    const c = await api('POST', '/instance/create', { framework: 'openclaw', name });
    expect(c.status, c.text).toBe(200);
    instances.push({ id: c.json.instance_id as string, url: c.json.url as string, token: c.json.access_token as string });
  }
  for (const i of instances) {
    await waitFor(
      `${i.id} running`,
      async () => {
        const s = (await api('GET', `/instance/status/${i.id}`)).json;
        if (s.status === 'failed') throw new Error(`failed: ${String(s.failure_reason)}`);
        return s.status === 'running';
      },
      240_000,
      1000,
    );
  }
  const ca = edge.caFile.replace(/root\.crt$/, '');
  browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    // Trust exactly the edge's local CA (its root and intermediate keys); every other certificate error stands.
    args: ['--no-sandbox', `--ignore-certificate-errors-spki-list=${[spki(`${ca}root.crt`), spki(`${ca}intermediate.crt`)].join(',')}`],
  });
}, 420_000);

afterAll(async () => {
  await browser?.close();
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

/** What the instance's gateway logged about WebSocket connections from this origin. */
const wsLog = async (id: string, host: string) =>
  (await exec('docker', ['logs', `agenthost-${id}`], { timeout: 30_000, maxBuffer: 32 * 1024 * 1024 })).stdout
    .split('\n')
    .filter((l) => l.includes('[ws]') && l.includes(`origin=https://${host}`));

describe('the OpenClaw Control UI through the edge, in Chromium', () => {
  it('loads over HTTPS, authenticates with the instance token and connects over the WebSocket', async () => {
    const a = instances[0]!;
    const first = await openControlUi(a.url, a.token);
    // The page's URL in the message: where the browser ended up when it did not stay on the instance.
    expect(first.page.url().startsWith(`https://${a.id}.agenthost.localhost:${HTTPS}/`), first.page.url()).toBe(true);
    // The token is accepted; a browser the instance has never seen is then paired once by its owner (OpenClaw's
    // rule for every non-loopback browser): its request is pending on the instance, and the owner sees it and
    // approves it through the API (the edge, the gateway, the provisioner running the instance's own CLI).
    const pending = await pendingRequest(a.id, first.frames, a.token);
    expect(pending).toMatchObject({ request_id: expect.any(String) });
    expect(JSON.stringify(pending)).not.toContain(a.token);
    expect(await wsLog(a.id, `${edge.hostOf(a.id)}:${HTTPS}`)).not.toEqual(expect.arrayContaining([expect.stringMatching(/token_mismatch|token mismatch/)]));
    // An id that is not pending is a 404 in the error shape; then the real one is approved.
    const unknown = await api('POST', `/instance/devices/approve/${a.id}`, { request_id: 'not-a-pending-request' });
    expect(unknown.json).toMatchObject({ code: 'DEVICE_REQUEST_NOT_FOUND', status: 404 });
    const approved = await api('POST', `/instance/devices/approve/${a.id}`, { request_id: pending.request_id });
    expect(approved.status, approved.text).toBe(200);
    expect(approved.json).toMatchObject({ success: true, decision: 'approve' });
    await expectDocumented('approveDevice', approved);
    // Opened again with the token in the same browser (its device identity is kept in this profile): connected,
    // the gateway's hello over the proxied WebSocket.
    const { page, frames } = first;
    await openWithToken(page, a.url, a.token);
    await waitFor('the UI connected', async () => seen(frames, /hello-ok/), 90_000, 500);
    // The owner's list now shows it paired, and no request is left pending.
    const after = await devicesOf(a.id);
    expect(after.pending).toEqual([]);
    expect(after.paired.length).toBeGreaterThan(0);
    await page.browserContext().close();

    // Another browser with the same token asks too; the owner rejects it: it is not paired, and that request is gone.
    const other = await openControlUi(a.url, a.token);
    const asked = await pendingRequest(a.id, other.frames, a.token);
    const rejected = await api('POST', `/instance/devices/reject/${a.id}`, { request_id: asked.request_id });
    expect(rejected.status, rejected.text).toBe(200);
    await expectDocumented('rejectDevice', rejected);
    const now = await devicesOf(a.id);
    expect(now.paired.length).toBe(after.paired.length);
    expect(now.pending.map((p) => p.request_id)).not.toContain(asked.request_id);
    expect(seen(other.frames, /hello-ok/)).toBe(false);
    await other.page.browserContext().close();
  }, 300_000);

  it("does not open instance B with instance A's token", async () => {
    const [a, b] = instances as [(typeof instances)[0], (typeof instances)[0]];
    const ui = await openControlUi(b.url, a.token);
    const { page, frames } = ui;
    // B refuses the token through the edge: on its WebSocket (the connect request answered with an error), or on
    // its UI's authenticated config request.
    const { refused } = ui;
    await waitFor(
      'instance B to refuse the token',
      async () => {
        if (refused() || seen(frames, /"ok":\s*false|unauthori[sz]ed|mismatch/i)) return true;
        const l = await wsLog(b.id, `${edge.hostOf(b.id)}:${HTTPS}`);
        return l.some((x) => /unauthorized|mismatch/i.test(x));
      },
      100_000,
      1000,
    ).catch((err: Error) => explained(err, frames, b.id, a.token));
    expect(seen(frames, /hello-ok/)).toBe(false);
    expect((await api('GET', `/instance/devices/${b.id}`)).json).toMatchObject({ pending: [] });
    await page.browserContext().close();
  }, 180_000);
});
