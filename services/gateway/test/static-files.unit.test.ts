import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, DEFAULT_TIERS } from '@agenthost/shared';
import type { GatewayConfig } from '../src/config.ts';
import { staticFiles } from '../src/http/static-files.ts';

const log = createLogger('static-files-test', 'silent');
const config = (dir: string) =>
  ({
    DASHBOARD_DIR: dir,
    DASHBOARD_SOLANA_RPC_URL: 'http://127.0.0.1:8899',
    DASHBOARD_SOLANA_CHAIN: 'solana:localnet',
    TIER_LIMITS_JSON: DEFAULT_TIERS,
  }) as GatewayConfig;

let server: Server;
let base: string;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'dashboard-dist-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><script type="module" src="/assets/index-abc123.js"></script>');
  writeFileSync(join(dir, 'assets', 'index-abc123.js'), 'console.log(1)');
  const files = staticFiles(config(dir), log)!;
  server = createServer((req, res) => {
    if (!files.serve(req, res, req.url!.split('?')[0]!)) res.writeHead(404).end('not a dashboard file');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe("the dashboard's static files", () => {
  it('serves the page to be revalidated each time, with a policy that keeps scripts to this origin', async () => {
    const res = await fetch(`${base}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('content-security-policy')).toBe(
      "default-src 'self'; img-src 'self' data:; connect-src 'self' http://127.0.0.1:8899; frame-ancestors 'none'; base-uri 'none'",
    );
    const again = await fetch(`${base}/index.html`, { headers: { 'if-none-match': res.headers.get('etag')! } });
    expect(again.status).toBe(304);
  });

  it('keeps hashed assets cached for a year', async () => {
    const res = await fetch(`${base}/assets/index-abc123.js`);
    expect(await res.text()).toBe('console.log(1)');
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  });

  it('tells the page where the chain is and the tier table it shows', async () => {
    const res = await fetch(`${base}/config.json`);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(await res.json()).toEqual({ solana_rpc_url: 'http://127.0.0.1:8899', solana_chain: 'solana:localnet', tiers: DEFAULT_TIERS });
  });

  it('serves nothing else: other paths, other methods, paths out of the directory', async () => {
    expect((await fetch(`${base}/package.json`)).status).toBe(404);
    expect((await fetch(`${base}/assets/../../etc/passwd`)).status).toBe(404);
    expect((await fetch(`${base}/`, { method: 'POST', body: 'x' })).status).toBe(404);
    const head = await fetch(`${base}/`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('is off, with a warning, when the dashboard is not built', () => {
    expect(staticFiles(config(join(tmpdir(), 'no-such-dashboard-dist')), log)).toBeUndefined();
  });
});
