import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgenthost } from '../src/index.ts';

// RFC 6761: names under .localhost are the loopback. Node's resolver (glibc's) does not know it, so the SDK resolves
// them itself: here a server on 127.0.0.1 is reached as agenthost.localhost, with no /etc/hosts entry, for a call and
// for an event stream (the SSE reader goes through the same fetch). The TLS side, through a real edge: packages/cli/test/localhost.test.ts.

let server: http.Server;
let port: number;
const seen: Array<{ host?: string; url?: string }> = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    seen.push({ host: req.headers.host, url: req.url });
    if (req.url === '/api/auth/me') {
      res.setHeader('content-type', 'application/json');
      return void res.end(JSON.stringify({ user_id: 'u-1', wallet_address: 'w', subscription: null }));
    }
    res.setHeader('content-type', 'text/event-stream');
    res.end(`id: 7\nevent: deleted\ndata: ${JSON.stringify({ instance_id: 'inst-0', user_id: 'u-1', deleted_at: new Date().toISOString() })}\n\n`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => void server?.close());

describe('the SDK in Node', () => {
  it('reaches agenthost.localhost (and deeper names under .localhost) on the loopback, for calls and event streams', async () => {
    const sdk = createAgenthost({ baseUrl: `http://agenthost.localhost:${port}/api`, token: 't' });
    const me = await sdk.api.GET('/auth/me');
    expect(me.response.status).toBe(200);
    expect(me.data).toMatchObject({ user_id: 'u-1' });
    const events = [];
    for await (const ev of sdk.events('inst-0')) events.push(ev.event);
    expect(events).toEqual(['deleted']);
    const deeper = createAgenthost({ baseUrl: `http://inst-0.agenthost.localhost:${port}/api`, token: 't' });
    expect((await deeper.api.GET('/auth/me')).response.status).toBe(200);
    // The server saw the names the client used (virtual hosts, SNI on https), not the address they resolved to.
    expect(seen.map((s) => s.host)).toEqual([`agenthost.localhost:${port}`, `agenthost.localhost:${port}`, `inst-0.agenthost.localhost:${port}`]);
  });
});
