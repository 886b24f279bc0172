import http from 'node:http';
import type { AddressInfo } from 'node:net';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '@agenthost/shared';
import { waitFor } from '@agenthost/testkit';
import { error } from '../src/answer.ts';
import { notHere } from '../src/not-here.ts';

// The page the dashboard's link <url>/#token=… gets while the instance does not run (not-here.ts): its script sends the
// token until the agent answers, then loads the agent's page. Here in Chromium, against a server that answers as the
// edge does, so each of the edge's answers can be given in turn: those with Retry-After are asked again, the others end.

type Code = keyof typeof ERROR_CODES;
type Answer = { code: Code; retryAfter?: number } | 'agent';
let answers: Answer[] = [];
let asked = 0;
let server: http.Server;
let base: string;
let browser: Browser;

const agent = (res: http.ServerResponse, cookie?: string) => {
  res.writeHead(200, { 'content-type': 'application/json', ...(cookie ? { 'set-cookie': cookie } : {}) });
  res.end(JSON.stringify({ agent: 'standin' }));
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.headers.authorization === 'Bearer tok') {
      const a = answers[Math.min(asked++, answers.length - 1)]!;
      if (a === 'agent') return agent(res, 'session=1; Path=/');
      return error(res, a.code, a.retryAfter ? { retryAfter: a.retryAfter } : {});
    }
    if ((req.headers.cookie ?? '').includes('session=1')) return agent(res);
    notHere(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
});

afterAll(async () => {
  await browser?.close();
  server?.close();
});

const open = async (given: Answer[]) => {
  answers = given;
  asked = 0;
  const page = await (await browser.createBrowserContext()).newPage();
  await page.goto(`${base}/#token=tok`, { waitUntil: 'domcontentloaded' });
  return page;
};

describe("the page of an instance that does not run, opened with its owner's link", () => {
  it('asks again after each answer that says when to (waking, unreachable for a moment, busy), then shows the agent', async () => {
    const page = await open([
      { code: 'INSTANCE_UNREACHABLE', retryAfter: 1 },
      { code: 'INSTANCE_STARTING', retryAfter: 1 },
      { code: 'SERVICE_UNAVAILABLE', retryAfter: 1 },
      'agent',
    ]);
    await waitFor(
      'the agent in the page',
      async () => {
        const html = await page.content().catch(() => '');
        if (html.includes('"agent":"standin"')) return true;
        throw new Error(`after ${asked} answers the page shows ${await page.$eval('#m', (e) => e.textContent).catch(() => '(no #m)')}`);
      },
      30_000,
      100,
    );
    expect(asked).toBe(4);
    await page.browserContext().close();
  });

  it('says an answer that does not pass (a stopped instance) and asks no more', async () => {
    const page = await open([{ code: 'INSTANCE_STOPPED' }]);
    const said = ERROR_CODES.INSTANCE_STOPPED.message;
    await waitFor('the reason in the page', async () => (await page.$eval('#m', (e) => e.textContent)) === said, 30_000, 100);
    // Longer than any wait between two asks (at most 5 s): nothing more is asked.
    await new Promise((r) => setTimeout(r, 6000));
    expect(asked).toBe(1);
    await page.browserContext().close();
  }, 40_000);
});
