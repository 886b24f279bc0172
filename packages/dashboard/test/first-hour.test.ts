import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainClient, recordSecret, waitFor } from '@agenthost/testkit';
import { press, textOf, waitForFocus } from './browser.ts';
import { browser, edge, gatewayOrigin, recordFrames, stack, startFirstHour, stopFirstHour } from './first-hour-stack.ts';
import { TestWallet } from './test-wallet.ts';

// A new user's first hour, as they live it: the dashboard at the edge's HTTPS origin, a wallet that builds its
// sign-in message from the page (as Phantom does), a real OpenClaw instance whose Control UI "Open" leads to.
beforeAll(startFirstHour, 600_000);
afterAll(stopFirstHour);

let page: Page;
let wallet: TestWallet;
let instanceId: string;
let token: string;

const kept = () => page.evaluate(() => localStorage.getItem('agenthost.instance-tokens'));
/** Where the focus is after a navigation, and whether it draws a ring. */
const focus = () =>
  page.evaluate(() => {
    const d = (globalThis as unknown as { document: { activeElement: { tagName: string; textContent: string } } }).document;
    const style = (globalThis as unknown as { getComputedStyle(e: unknown): { outlineStyle: string } }).getComputedStyle(d.activeElement);
    return { tag: d.activeElement.tagName, text: d.activeElement.textContent, outline: style.outlineStyle };
  });

describe("a new user's first hour on the dashboard, in Chromium through the HTTPS edge", () => {
  it('signs in with a wallet that binds the sign-in message to the page, as Phantom does', async () => {
    wallet = new TestWallet(stack.chain!.url, { name: 'Page Wallet', bindToPage: true });
    page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 800 });
    await wallet.install(page);
    page.on('pageerror', (err) => console.error('page error:', err));
    await page.goto(`${edge.origin}/`);
    await press(page, 'Sign in with Page Wallet');
    await textOf(page, '#plan-summary', /No subscription yet/);
    const host = new URL(edge.origin).host;
    expect(wallet.messages[0]!.split('\n')[0]).toBe(`${host} wants you to sign in with your Solana account:`);
    expect(wallet.messages[0]).toContain(`\nURI: ${edge.origin}\n`);
    recordSecret(JSON.parse((await page.evaluate(() => localStorage.getItem('agenthost.session')))!).token);
  });

  it('subscribes to pro with the wallet', async () => {
    await chainClient(stack).airdrop(wallet.address, 2_000_000_000);
    await page.reload();
    await press(page, 'Subscribe to Pro');
    await textOf(page, '#status', /You are subscribed to Pro/, 150_000);
  }, 180_000);

  it('creates an OpenClaw instance, shown running, its token kept in this browser for Open', async () => {
    await page.goto(`${edge.origin}/#/instances`);
    await page.type('#new-name', 'first-agent');
    await press(page, 'Create instance');
    await page.waitForSelector('#access-token', { timeout: 120_000 });
    token = await page.$eval('#access-token', (el) => (el as unknown as { value: string }).value);
    recordSecret(token);
    // A real OpenClaw takes a while to boot, far longer on a loaded engine. A failure is shown as soon as it is known,
    // with its reason, and the test says that reason rather than waiting out its bound.
    expect(await textOf(page, '#created', /first-agent (is running\.|failed to start)/, 300_000)).toMatch(/first-agent is running\./);
    await textOf(page, '#instances tbody', /first-agent\s+running/);
    instanceId = await page.$eval('#instances tbody tr', (el) => el.getAttribute('data-instance')!);
    expect(JSON.parse((await kept())!)).toEqual({ [instanceId]: token });
    // Every link to the agent carries the token in its fragment only, and sends no Referer.
    for (const link of await page.$$eval('a[target=_blank]', (as) => as.map((a) => ({ href: a.getAttribute('href')!, rel: a.getAttribute('rel') })))) {
      const u = new URL(link.href);
      expect(u.host).toBe(`${instanceId}.${new URL(edge.origin).host}`);
      expect(u.search).toBe('');
      expect(u.hash).toBe(`#token=${encodeURIComponent(token)}`);
      expect(link.rel).toContain('noreferrer');
    }
  }, 420_000);

  it('goes to the instance by keyboard: the focus is on its heading, with no ring round the content', async () => {
    await waitForFocus(page, 'first-agent');
    await page.keyboard.press('Enter');
    await textOf(page, 'h1', /first-agent/);
    expect(await focus()).toEqual({ tag: 'H1', text: 'first-agent', outline: 'none' });
  });

  it('offers to paste the token when this browser lost it, then Open carries it', async () => {
    await page.evaluate(() => localStorage.removeItem('agenthost.instance-tokens'));
    await page.reload();
    await textOf(page, '#open-section', /This browser does not hold the access token of first-agent/);
    await page.type('#paste-token', token);
    await press(page, 'Keep the token in this browser');
    await textOf(page, '#status', /The access token of first-agent is kept in this browser/);
    expect(new URL(await page.$eval('#open-agent', (a) => a.getAttribute('href')!)).hash).toBe(`#token=${encodeURIComponent(token)}`);
  });

  it('shows the log tail wrapped, with nothing cut off at phone width', async () => {
    await textOf(page, '#logs', /\S/);
    await page.setViewport({ width: 390, height: 844 });
    const box = await page.$eval('#logs', (el) => ({
      scroll: el.scrollWidth,
      client: el.clientWidth,
      longest: Math.max(...el.textContent!.split('\n').map((l: string) => l.length)),
    }));
    await page.setViewport({ width: 1100, height: 800 });
    expect(box.longest).toBeGreaterThan(60); // lines longer than the box, so wrapping is what is shown
    expect(box.scroll).toBeLessThanOrEqual(box.client);
  });

  let ui: Page;
  let frames: string[];

  /** Click Open on the dashboard and return the new tab it opens (target=_blank, no opener: found by where it goes). */
  async function open(): Promise<Page> {
    const instanceOrigin = `https://${instanceId}.${new URL(edge.origin).host}`;
    const before = new Set(browser.targets());
    const opened = browser.waitForTarget((t) => !before.has(t) && t.url().startsWith(instanceOrigin), { timeout: 60_000 });
    await press(page, 'Open first-agent');
    const target = await opened.catch((err: Error) => {
      const where = browser.targets().map((t) => `${t.type()} ${t.url().replace(/#.*/, '#…')}`);
      throw new Error(`${err.message}; the browser's targets: ${where.join(', ')}`);
    });
    const tab = (await target.page())!;
    frames = await recordFrames(tab);
    await tab.waitForFunction(() => (globalThis as unknown as { document: { readyState: string } }).document.readyState !== 'loading', { timeout: 60_000 });
    expect(new URL(tab.url()).origin).toBe(instanceOrigin);
    expect(await tab.evaluate(() => (globalThis as unknown as { document: { referrer: string } }).document.referrer)).toBe('');
    await page.bringToFront();
    return tab;
  }

  it('opens the Control UI signed in, and the browser’s pairing request appears on the dashboard without a press', async () => {
    await textOf(page, '#devices', /No browser is waiting for approval/, 120_000);
    ui = await open();
    // The request shows up by itself (the token was accepted: OpenClaw asks to pair only then).
    const pending = await textOf(page, '#devices-pending', /Approve/, 120_000);
    expect(pending).not.toContain(token);
    await press(page, 'Approve');
    await textOf(page, '#status', /Approved: .*Open the agent again/, 90_000);
    await textOf(page, '#devices-paired', /^[1-9]\d* paired\.$/, 60_000);
  }, 300_000);

  it('connects the Control UI once approved, opened again from the dashboard: no token pasted, none in a URL it sends', async () => {
    await ui.close();
    ui = await open();
    const sent: string[] = [];
    ui.on('request', (r) => sent.push(r.url()));
    // biome-ignore lint/performance/useDomNodeTextContent: what the user sees
    const shown = () => ui.evaluate(() => (globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText);
    await waitFor('the Control UI connected to its agent', async () => frames.some((f) => /hello-ok/.test(f)), 90_000, 500).catch(async (err: Error) => {
      throw new Error(`${err.message}; the Control UI showed: ${(await shown()).replaceAll(token, '<token>').slice(0, 600)}`);
    });
    expect(await shown()).not.toMatch(/token missing|token mismatch|pairing required/i);
    expect(sent.filter((u) => u.includes(token) || u.includes(encodeURIComponent(token)))).toEqual([]);
    await page.bringToFront();
  }, 180_000);

  it('stores OPENAI_API_KEY and sees the running agent take it', async () => {
    await page.bringToFront();
    await page.type('#key-name', 'OPENAI_API_KEY');
    await page.type('#key-value', 'sk-first-hour-test-value-1234');
    await press(page, 'Save key');
    await textOf(page, '#status', /OPENAI_API_KEY saved; the running agent has it now\./, 90_000);
    await textOf(page, '#keys', /OPENAI_API_KEY/);
    expect(await page.content()).not.toContain('sk-first-hour-test-value-1234');
  }, 120_000);

  it('deletes the instance, and this browser forgets its token', async () => {
    await press(page, 'Delete instance');
    await press(page, 'Delete first-agent');
    await textOf(page, '#status', /first-agent was deleted/, 90_000);
    await textOf(page, 'main', /No instances yet/);
    expect(JSON.parse((await kept()) ?? '{}')).toEqual({});
    await ui.close();
  }, 120_000);
});

describe('a sign-in the service refuses', () => {
  it('says the server’s reason in plain words: a page away from the edge binds the message to another domain', async () => {
    const other = new TestWallet(stack.chain!.url, { name: 'Page Wallet', bindToPage: true });
    const context = await browser.createBrowserContext();
    const away = await context.newPage();
    try {
      await other.install(away);
      // The gateway serves the dashboard at its own address too; auth signs in for the edge's origin only.
      await away.goto(`${gatewayOrigin}/`);
      await press(away, 'Sign in with Page Wallet');
      const host = new URL(gatewayOrigin).host.replaceAll('.', '\\.');
      expect(await textOf(away, '#alert', /refused/)).toMatch(
        new RegExp(
          `^Sign-in failed\\. The service refused the sign-in message your wallet signed: the domain "${host}" is not one this service signs in for\\. ` +
            `This service signs in on ${edge.origin.replaceAll('.', '\\.')}: open the dashboard there\\.$`,
        ),
      );
      expect(await away.evaluate(() => localStorage.getItem('agenthost.session'))).toBeNull();
    } finally {
      await context.close();
    }
  });
});
