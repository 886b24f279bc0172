import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainClient, recordSecret } from '@agenthost/testkit';
import { controlNames, holdRequests, press, screenshot, textOf, unnamedControls, waitForFocus } from './browser.ts';
import { browser, gatewayOrigin, origin, page, stack, startDashboard, stopDashboard, wallet } from './dashboard-stack.ts';
import { TestWallet } from './test-wallet.ts';

beforeAll(startDashboard, 240_000);
afterAll(stopDashboard);

const session = () => page.evaluate(() => localStorage.getItem('agenthost.session'));

describe('the dashboard in Chromium, with a Wallet Standard wallet on devchain', () => {
  it('serves the page with cache headers: the page is revalidated, its hashed assets kept a year', async () => {
    const index = await fetch(`${gatewayOrigin}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    expect(index.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await index.text();
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const js = await fetch(`${gatewayOrigin}${asset}`);
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await fetch(`${gatewayOrigin}/`, { headers: { 'if-none-match': index.headers.get('etag')! } })).status).toBe(304);
    expect((await fetch(`${gatewayOrigin}/nothing-here`)).status).toBe(404);
  });

  it('a declined signature leaves the user signed out, with a clear message; signing in then works', async () => {
    await page.goto(`${origin}/`);
    await textOf(page, 'main', /Sign in with Test Wallet/);
    expect(await unnamedControls(page)).toEqual([]);
    await screenshot(page, 'sign-in');

    wallet.decline = true;
    await press(page, 'Sign in with Test Wallet');
    expect(await textOf(page, '#alert', /did not sign/)).toMatch(/Test Wallet did not sign .*You are not signed in/);
    expect(await session()).toBeNull();
    expect(await controlNames(page)).toContain('button: Sign in with Test Wallet');

    // By keyboard alone: Tab to the wallet's button, Enter.
    await waitForFocus(page, 'Sign in with Test Wallet');
    await page.keyboard.press('Enter');
    // No subscription yet: the plans are shown first.
    await textOf(page, '#plan-summary', /No subscription yet/);
    expect(JSON.parse((await session())!)).toMatchObject({ wallet_address: wallet.address, wallet_name: 'Test Wallet' });
    recordSecret(JSON.parse((await session())!).token);
  });

  it('subscribes to pro with a transaction the wallet signs and sends, and shows the expiry', async () => {
    await chainClient(stack).airdrop(wallet.address, 2_000_000_000);
    await page.reload();
    await textOf(page, '#wallet-balance', /Wallet balance: 2 SOL/);
    expect(await textOf(page, '#plans ~ ul', /0\.1 SOL per 30 days/)).toMatch(/Pro\s+0\.1 SOL per 30 days\s+1 instance\s/);
    expect(await unnamedControls(page)).toEqual([]);
    await screenshot(page, 'plans');

    // Declined in the wallet: nothing is paid, the page still offers the plans.
    wallet.decline = true;
    await press(page, 'Subscribe to Pro');
    expect(await textOf(page, '#alert', /transaction/)).toMatch(/Test Wallet did not sign or send the transaction .*Nothing was paid/);
    await textOf(page, '#plan-summary', /No subscription yet/);
    expect(await textOf(page, '#wallet-balance', /SOL/)).toBe('Wallet balance: 2 SOL');

    await press(page, 'Subscribe to Pro');
    await textOf(page, '#status', /You are subscribed to Pro/, 60_000);
    const summary = await textOf(page, '#plan-summary', /Active/);
    expect(summary).toMatch(/Pro/);
    expect(summary).toMatch(/Expires\s+\d+ \w+ \d{4}/);
    expect((await chainClient(stack).subscription(wallet.address))?.tier).toBe(1);
    await screenshot(page, 'subscription');
  });

  it('shows usage before any instance', async () => {
    await page.goto(`${origin}/#/usage`);
    expect(await textOf(page, '#usage-instances-text', /of/)).toBe('0 of 1');
  });

  let instanceId: string;

  it('creates an instance with progress until running, and shows its access token once', async () => {
    await page.goto(`${origin}/#/instances`);
    await textOf(page, 'main', /No instances yet/);
    await page.type('#new-name', 'dash-agent');
    await press(page, 'Create instance');
    await page.waitForSelector('#access-token', { timeout: 60_000 });
    const token = await page.$eval('#access-token', (el) => (el as unknown as { value: string }).value);
    recordSecret(token);
    expect(token.length).toBeGreaterThan(10);
    expect(await controlNames(page)).toEqual(expect.arrayContaining(['button: Copy access token', 'link: Open dash-agent', 'textbox: Access token']));
    await textOf(page, '#created', /dash-agent is running\./, 120_000);
    await textOf(page, '#instances tbody', /dash-agent\s+running/);
    instanceId = await page.$eval('#instances tbody tr', (el) => el.getAttribute('data-instance')!);
    expect(await unnamedControls(page)).toEqual([]);
    // The screenshots are committed: the token in them is masked.
    await page.$eval('#access-token', (el) => ((el as unknown as { value: string }).value = '•'.repeat(43)));
    await screenshot(page, 'instances');
    await page.setViewport({ width: 390, height: 844 });
    // At phone width nothing pushes the page sideways (a wide table scrolls inside its own box).
    expect(
      await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth),
    ).toBeLessThanOrEqual(390);
    await screenshot(page, 'instances-phone');
    await page.setViewport({ width: 1100, height: 800 });
    // Create → running takes seconds, far more on a loaded engine: the waits above allow up to three minutes.
  }, 240_000);

  it('says plainly that the quota is reached, and keeps the list as it was', async () => {
    await press(page, 'I have saved it, hide the token');
    await press(page, 'Create instance');
    expect(await textOf(page, '#alert', /limit/)).toMatch(/instance limit is reached\. Delete an instance or upgrade/);
    expect(await page.$$eval('#instances tbody tr', (rows) => rows.length)).toBe(1);
    await textOf(page, '#instances tbody', /dash-agent\s+running/);
    await screenshot(page, 'quota-reached');
  });

  it('adds a key by name to the instance and shows it in the audit log, never the value', async () => {
    await press(page, 'dash-agent');
    await textOf(page, '#instance-status', /running/);
    await textOf(page, '#instance-memory', /MB of 256 MB/);
    await page.type('#key-name', 'OPENAI_API_KEY');
    await page.type('#key-value', 'sk-dashboard-test-value-1234');
    await press(page, 'Save key');
    await textOf(page, '#status', /OPENAI_API_KEY saved/);
    await textOf(page, '#keys', /OPENAI_API_KEY/);
    expect(await textOf(page, '#audit tbody', /OPENAI_API_KEY/)).toMatch(/OPENAI_API_KEY\s+stored\s+28 bytes/);
    expect(await page.content()).not.toContain('sk-dashboard-test-value-1234');
    expect(await unnamedControls(page)).toEqual([]);
    expect(await controlNames(page)).toEqual(
      expect.arrayContaining(['button: Delete OPENAI_API_KEY', 'button: Replace the value of OPENAI_API_KEY', 'button: Delete instance']),
    );
    await screenshot(page, 'instance');

    // Replace its value, then delete it: each is one more line of the audit log.
    await press(page, 'Replace the value of OPENAI_API_KEY');
    await page.type('#key-value', 'sk-dashboard-second-value');
    await press(page, 'Save key');
    await textOf(page, '#status', /OPENAI_API_KEY replaced/);
    await textOf(page, '#audit tbody', /OPENAI_API_KEY\s+updated\s+25 bytes/);
    await press(page, 'Delete OPENAI_API_KEY');
    await page.waitForSelector('dialog[open]');
    await page.click('dialog[open] button.danger');
    await textOf(page, '#status', /OPENAI_API_KEY deleted/);
    await textOf(page, '#keys-title ~ div', /No keys yet/);
    await textOf(page, '#audit tbody', /OPENAI_API_KEY\s+deleted/);
  });

  it('shows the CPU, memory and the tail of the agent’s log', async () => {
    expect(await textOf(page, '#instance-cpu', /%/)).toMatch(/^\d+\.\d %$/);
    await textOf(page, '#logs', /ready/);
  });

  it('says plainly when an agent has no device pairing (the stand-in agent; a real OpenClaw lists its browsers)', async () => {
    // Read on its own when the page opens (first-hour.test.ts shows a real request appearing).
    await textOf(page, '#devices', /This agent has no device pairing/);
    // A refusal, not a failure: the provisioner says so at info, without a stack at error level.
    const said = stack.services
      .get('provisioner')!
      .lines()
      .filter((l) => l.includes('DEVICES_UNSUPPORTED'));
    expect(said.length).toBeGreaterThan(0);
    expect(said.filter((l) => l.includes('"level":"error"'))).toEqual([]);
  });

  it('stops and starts the instance, with the status following', async () => {
    await press(page, 'Stop');
    await textOf(page, '#instance-status', /stopped/, 60_000);
    expect(await page.$eval('#do-stop', (el) => el.hasAttribute('disabled'))).toBe(true);
    await press(page, 'Start');
    await textOf(page, '#instance-status', /running/, 120_000);
    expect(await textOf(page, '#audit tbody', /OPENAI_API_KEY/)).toMatch(/stored/);
  });

  it('shows a status change made elsewhere (the CLI, another tab) from the event stream, every status read held back', async () => {
    await textOf(page, '#instance-status', /running/);
    const headers = { authorization: `Bearer ${(JSON.parse((await session())!) as { token: string }).token}` };
    const call = (verb: string) =>
      fetch(`${stack.baseUrl}/instance/${verb}/${decodeURIComponent(page.url().split('#/instance/')[1]!)}`, { method: 'POST', headers });
    const release = await holdRequests(page, /\/api\/instance\/(status|list)/); // what shows next can only come from the stream
    expect((await call('stop')).status).toBe(200);
    await textOf(page, '#instance-status', /stopped/, 60_000).finally(async () =>
      console.log(`[dashboard] a stop shown from the stream; ${await release()} status reads held`),
    );
    expect((await call('start')).status).toBe(200);
    await textOf(page, '#instance-status', /running/, 120_000);
  });

  it('shows the usage changed by the instance and the calls made', async () => {
    await page.goto(`${origin}/#/usage`);
    expect(await textOf(page, '#usage-instances-text', /of/)).toBe('1 of 1');
    const requests = await textOf(page, '#usage-requests-text', /of 10,000/);
    expect(Number(requests.split(' ')[0]!.replace(/,/g, ''))).toBeGreaterThan(3);
    expect(await unnamedControls(page)).toEqual([]);
    await screenshot(page, 'usage');
  });

  it('an expired session sends the user to sign in with a message, and back to the same page after', async () => {
    const { token } = JSON.parse((await session())!);
    // The server ends the session (as at expiry, the next call is a 401); the page still holds the token.
    expect((await stack.api.withToken(token).post('/auth/logout')).status).toBe(200);
    await page.reload();
    expect(await textOf(page, '#alert', /session/)).toMatch(/Your session has expired or was ended\. Sign in again/);
    expect(await session()).toBeNull();
    await screenshot(page, 'session-expired');
    await press(page, 'Sign in with Test Wallet');
    expect(await textOf(page, '#usage-instances-text', /of/)).toBe('1 of 1');
    expect(page.url()).toMatch(/#\/usage$/);

    // A session past its expiry is not used at all: the page says so before any call.
    await page.evaluate(() => {
      const s = JSON.parse(localStorage.getItem('agenthost.session')!);
      localStorage.setItem('agenthost.session', JSON.stringify({ ...s, expires_at: new Date(Date.now() - 1000).toISOString() }));
    });
    await page.reload();
    expect(await textOf(page, '#alert', /session/)).toBe('Your session has expired. Sign in again to continue where you were.');
    await press(page, 'Sign in with Test Wallet');
    expect(await textOf(page, '#usage-instances-text', /of/)).toBe('1 of 1');
  });

  it('deletes the instance after a confirmation', async () => {
    await page.goto(`${origin}/#/instance/${instanceId}`);
    await textOf(page, '#instance-status', /running/);
    await press(page, 'Delete instance');
    await page.waitForSelector('dialog[open]');
    // Escape closes the confirmation without deleting (the native dialog's keyboard behaviour).
    await page.keyboard.press('Escape');
    await page.waitForSelector('dialog', { hidden: true });
    await textOf(page, '#instance-status', /running/);
    await press(page, 'Delete instance');
    await press(page, 'Delete dash-agent');
    await textOf(page, '#status', /dash-agent was deleted/, 60_000);
    await textOf(page, 'main', /No instances yet/);
    expect((await stack.api.withToken(JSON.parse((await session())!).token).get(`/instance/status/${instanceId}`)).status).toBe(404);
  });
});

describe('renew and cancel from the subscription page', () => {
  it('renewing appends 30 days to the expiry; cancelling after a confirmation keeps it active until then', async () => {
    await page.goto(`${origin}/#/subscription`);
    const before = (await chainClient(stack).subscription(wallet.address))!.expiresAt;
    await press(page, 'Renew Pro for 30 more days');
    await textOf(page, '#status', /Pro renewed for 30 more days/, 60_000);
    expect((await chainClient(stack).subscription(wallet.address))!.expiresAt).toBe(before + 30 * 86400);
    await textOf(page, '#plan-summary', new RegExp(new Date((before + 30 * 86400) * 1000).getUTCFullYear().toString()));

    await press(page, 'Cancel subscription');
    await page.waitForSelector('dialog[open]');
    expect(await unnamedControls(page)).toEqual([]);
    await press(page, 'Cancel');
    await textOf(page, '#plan-summary', /Active/);
    await press(page, 'Cancel subscription');
    await page.waitForSelector('dialog[open]');
    await page.$eval('dialog[open] button.danger', (b) => (b as unknown as { click(): void }).click());
    await textOf(page, '#status', /Your subscription is cancelled/, 60_000);
    expect(await textOf(page, '#plan-summary', /Cancelled/)).toMatch(/Cancelled \(active until it expires\)/);
  });
});

describe('a wallet without solana:signIn, and signing out', () => {
  it('signs in by signing the nonce message itself (solana:signMessage)', async () => {
    const plain = new TestWallet(stack.chain!.url, { name: 'Message Wallet', signIn: false });
    // A context of its own: the first page's session in localStorage is not this one's.
    const context = await browser.createBrowserContext();
    const second = await context.newPage();
    try {
      await plain.install(second);
      await second.goto(`${origin}/`);
      await press(second, 'Sign in with Message Wallet');
      await textOf(second, '#plan-summary', /No subscription yet/);
      expect(plain.signed).toBe(1);
      expect(JSON.parse((await second.evaluate(() => localStorage.getItem('agenthost.session')))!)).toMatchObject({ wallet_address: plain.address });
    } finally {
      await context.close();
    }
  });

  it('signs out: the token is revoked on the server and the page asks to sign in', async () => {
    const { token } = JSON.parse((await session())!);
    await press(page, 'Sign out');
    await textOf(page, '#status', /You are signed out/);
    expect(await session()).toBeNull();
    expect((await stack.api.withToken(token).get('/auth/me')).status).toBe(401);
    await textOf(page, 'main', /Sign in with Test Wallet/);
  });
});
