import { createHash, X509Certificate } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import puppeteer, { type Browser, type HTTPRequest, type Page, type SerializedAXNode } from 'puppeteer-core';
import { waitFor, type Edge } from '@agenthost/testkit';

export const SCREENSHOTS = join(import.meta.dirname, '../../../docs/screenshots');

/** Debian's chromium (deploy/install.sh installs it); as root it needs --no-sandbox. With an edge: trusting its CA. */
export function launch(edge?: Edge): Promise<Browser> {
  return puppeteer.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    // --disable-http2 with the edge: Chromium ends every HTTP/2 session, failing the requests in flight, whenever the
    // host's addresses change, which on this host is each time a suite makes or removes a Docker network (a user's
    // browser is not on the Docker host). HTTP/1.1 connections are left alone, as they were to the gateway directly.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', ...(edge ? [trustEdge(edge), '--disable-http2'] : [])],
  });
}

/**
 * Trust exactly the edge's local CA (its root and intermediate keys), as a user who installed its root does; every
 * other certificate error stands.
 */
function trustEdge(edge: Edge): string {
  const spki = (file: string) =>
    createHash('sha256')
      .update(new X509Certificate(readFileSync(file)).publicKey.export({ type: 'spki', format: 'der' }))
      .digest('base64');
  const dir = dirname(edge.caFile);
  return `--ignore-certificate-errors-spki-list=${[spki(join(dir, 'root.crt')), spki(join(dir, 'intermediate.crt'))].join(',')}`;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) as `${string}.png`, fullPage: true });
}

/** The visible text of the element matching `selector`, waited for until `expected` matches it. */
export async function textOf(page: Page, selector: string, expected: RegExp, timeoutMs = 30_000): Promise<string> {
  // biome-ignore lint/performance/useDomNodeTextContent: the text a user sees (rendered, hidden parts left out) is what the tests assert on
  const read = (sel: string) => page.$eval(sel, (el) => (el as unknown as { innerText: string }).innerText).catch(() => '');
  try {
    return await waitFor(
      `${selector} to say ${expected}`,
      async () => {
        const text = await read(selector);
        return expected.test(text) ? text : undefined;
      },
      timeoutMs,
      100,
    );
  } catch (err) {
    // What the user saw instead: the page's messages and its main content.
    const seen = { url: page.url(), alert: await read('#alert'), status: await read('#status'), main: (await read('main')).slice(0, 600) };
    throw new Error(`${(err as Error).message}; the page showed ${JSON.stringify(seen)}`);
  }
}

/** Click the button or link whose accessible name is `name` (as a keyboard or screen-reader user finds it). */
export async function press(page: Page, name: string): Promise<void> {
  // The page re-renders as its polls answer: a control found a moment ago may be replaced by an identical one.
  for (let attempt = 1; ; attempt++) {
    const el = await page.waitForSelector(`::-p-aria(${JSON.stringify(name).slice(1, -1)})`, { timeout: 30_000 });
    try {
      await el!.click();
      return;
    } catch (err) {
      if (attempt >= 5 || !/detached/i.test((err as Error).message)) throw err;
    }
  }
}

const CONTROLS = new Set([
  'button',
  'link',
  'textbox',
  'checkbox',
  'radio',
  'combobox',
  'listbox',
  'menuitem',
  'slider',
  'spinbutton',
  'switch',
  'tab',
  'searchbox',
]);

/** Every control in the accessibility tree that has no accessible name (must be none). */
export async function unnamedControls(page: Page): Promise<string[]> {
  const tree = await page.accessibility.snapshot({ interestingOnly: false });
  const out: string[] = [];
  const walk = (n: SerializedAXNode | null | undefined) => {
    if (!n) return;
    if (CONTROLS.has(n.role) && !(n.name ?? '').trim()) out.push(`${n.role} without a name`);
    n.children?.forEach(walk);
  };
  walk(tree);
  return out;
}

/** The names of the controls in the accessibility tree (to assert on what a screen reader offers). */
export async function controlNames(page: Page): Promise<string[]> {
  const tree = await page.accessibility.snapshot();
  const out: string[] = [];
  const walk = (n: SerializedAXNode | null | undefined) => {
    if (!n) return;
    if (CONTROLS.has(n.role)) out.push(`${n.role}: ${n.name}`);
    n.children?.forEach(walk);
  };
  walk(tree);
  return out;
}

/** Press Tab until the focused control's accessible name is `name` (a keyboard user's way to it). */
export async function waitForFocus(page: Page, name: string, maxTabs = 30): Promise<void> {
  for (let i = 0; i < maxTabs; i++) {
    await page.keyboard.press('Tab');
    const focused = await focusedName(page);
    if (focused === name) return;
  }
  throw new Error(`${maxTabs} presses of Tab never reached a control named ${JSON.stringify(name)}`);
}

async function focusedName(page: Page): Promise<string | undefined> {
  const find = (n: SerializedAXNode | null | undefined): SerializedAXNode | undefined => {
    if (!n) return undefined;
    if (n.focused) return n;
    for (const c of n.children ?? []) {
      const f = find(c);
      if (f) return f;
    }
    return undefined;
  };
  return find(await page.accessibility.snapshot())?.name;
}

/** Holds back the page's requests to matching URLs (they get no answer) until release(), which lets them go and says how many. */
export async function holdRequests(page: Page, url: RegExp): Promise<() => Promise<number>> {
  const held: HTTPRequest[] = [];
  const hold = (req: HTTPRequest) => (url.test(req.url()) ? held.push(req) : void req.continue());
  await page.setRequestInterception(true);
  page.on('request', hold);
  return async () => {
    page.off('request', hold);
    for (const req of held) await req.continue();
    await page.setRequestInterception(false);
    return held.length;
  };
}
