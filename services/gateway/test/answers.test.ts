import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn, startStack, type Stack } from '@agenthost/testkit';

// The HTTP layer's answers to the error table's cases, byte for byte (status line, headers but the date, the
// connection and the request id's value, and body), against a snapshot taken from the gateway before it moved to
// Express: a change of framework or of middleware must not change what a client sees.

let stack: Stack;
let url: URL;
let token = '';
beforeAll(async () => {
  stack = await startStack({ services: ['auth'], serviceEnv: { gateway: { ENTITLEMENT_RESTART_WAIT_MS: '0', NATS_REQUEST_TIMEOUT_MS: '1000' } } });
  url = new URL(stack.baseUrl);
  token = (await signIn(stack.api)).token;
});
afterAll(async () => {
  await stack?.stop();
});

const raw = (req: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const s = net.connect(Number(url.port), url.hostname, () => s.end(req));
    let d = '';
    s.on('data', (x) => (d += x.toString('latin1')));
    s.on('end', () => resolve(d));
    s.on('error', reject);
  });
const SKIP = new Set(['date', 'x-request-id', 'keep-alive', 'connection']);
const show = (answer: string) => {
  const [head, ...rest] = answer.split('\r\n\r\n');
  const lines = head!.split('\r\n');
  const hs = lines
    .slice(1)
    .map((l) => (l.toLowerCase().startsWith('x-request-id') ? l.replace(/: .*/, ': <id>') : l))
    .filter((l) => !SKIP.has(l.split(':')[0]!.toLowerCase()) || l.includes('<id>'))
    .sort();
  return [lines[0], ...hs, '', rest.join('\r\n\r\n')].join('\n');
};
const send = async (method: string, path: string, headers: Record<string, string> = {}, body?: Buffer | string) => {
  const b = body === undefined ? undefined : Buffer.from(body);
  const h = { Host: 'x', Connection: 'close', ...headers, ...(b ? { 'Content-Length': String(b.length) } : {}) };
  const head = `${method} ${path} HTTP/1.1\r\n${Object.entries(h)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n`;
  return new Promise<string>((resolve, reject) => {
    const s = net.connect(Number(url.port), url.hostname, () => {
      s.write(head);
      if (b) s.write(b);
    });
    let d = '';
    s.on('data', (x) => (d += x.toString('latin1')));
    s.on('end', () => resolve(d));
    s.on('error', reject);
  });
};
const json = { 'Content-Type': 'application/json' };
const bearer = () => ({ Authorization: `Bearer ${token}` });
const cases: [string, () => Promise<string>][] = [
  ['unknown path', () => send('GET', '/api/nope')],
  ['unknown path, other case', () => send('GET', '/API/Nope')],
  ['wrong method', () => send('DELETE', '/api/auth/login')],
  ['options', () => send('OPTIONS', '/api/auth/login')],
  ['options param path', () => send('OPTIONS', '/api/instance/status/x')],
  ['head', () => send('HEAD', '/api/health/live')],
  ['text/plain body', () => send('POST', '/api/auth/login', { 'Content-Type': 'text/plain' }, '{}')],
  ['latin1', () => send('POST', '/api/auth/login', { 'Content-Type': 'application/json; charset=latin1' }, '{}')],
  ['scalar json', () => send('POST', '/api/auth/login', json, '"str"')],
  ['broken json', () => send('POST', '/api/auth/login', json, '{bad')],
  ['too large', () => send('POST', '/api/auth/login', json, JSON.stringify({ pad: 'x'.repeat(70_000) }))],
  ['gzip bomb', () => send('POST', '/api/auth/login', { ...json, 'Content-Encoding': 'gzip' }, gzipSync(JSON.stringify({ pad: 'x'.repeat(1_000_000) })))],
  ['compress', () => send('POST', '/api/auth/login', { ...json, 'Content-Encoding': 'compress' }, '{}')],
  ['broken gzip', () => send('POST', '/api/auth/login', { ...json, 'Content-Encoding': 'gzip' }, 'not gzip')],
  ['empty object login', () => send('POST', '/api/auth/login', json, '{}')],
  ['bad nonce query', () => send('GET', '/api/auth/nonce?wallet_address=bad')],
  ['no token', () => send('GET', '/api/auth/me')],
  ['bad token', () => send('GET', '/api/auth/me', { Authorization: 'Bearer nope' })],
  ['malformed percent', () => send('GET', '/api/instance/status/%E0%A4%A')],
  ['billing down', () => send('GET', '/api/subscription/status', bearer())],
  ['subscriber, billing down', () => send('GET', '/api/usage/metrics', bearer())],
  ['applied empty', () => send('POST', '/api/keys/applied', json, '{}')],
  ['ready', () => send('GET', '/api/health/ready')],
  ['garbage', () => raw('NOT AN HTTP REQUEST\r\n\r\n')],
  ['long url', () => raw(`GET /api/health/live?pad=${'x'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`)],
];
describe('answers of the HTTP layer', () => {
  it('are byte for byte those of the gateway before Express, for every error case of the table it answers itself', async () => {
    let text = '';
    for (const [name, run] of cases) text += `=== ${name}\n${show(await run())}\n`;
    await expect(text).toMatchFileSnapshot('./answers.snapshot.txt');
  });
});
