import { setTimeout as sleep } from 'node:timers/promises';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Activity, establishedRemotes } from '../src/activity.ts';

// The keeper's reading of the kernel's TCP tables (idle sleep counts an owner's open connection to the edge as traffic),
// checked against real connections on this machine's loopback.
const open: Array<net.Server | net.Socket> = [];
afterEach(() => {
  for (const o of open.splice(0)) o instanceof net.Socket ? o.destroy() : o.close();
});

async function connection(host: string): Promise<number> {
  const server = net.createServer((s) => open.push(s));
  open.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as net.AddressInfo).port;
  const client = net.connect(port, host);
  open.push(client);
  await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
  return port;
}

const log = { warn: () => {}, info: () => {} } as never;

describe('open connections to agents', () => {
  it('are read from the kernel with the address and port the route table uses', async () => {
    const port = await connection('127.0.0.1');
    expect(await establishedRemotes()).toContain(`127.0.0.1:${port}`);
    const v6 = await connection('::1').catch(() => undefined);
    if (v6) expect(await establishedRemotes()).toContain(`[::1]:${v6}`);
  });

  it("count as the owner's traffic while the connection the request came on is open, and not once it is closed", async () => {
    // The "edge" listens on `port`; the client's end of the connection is what Caddy names as the request's remote.
    const server = net.createServer((s) => open.push(s));
    open.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const client = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
    const reported: string[][] = [];
    const activity = new Activity({ log, port, report: async (ids) => void reported.push(ids) });
    activity.touch('inst-a', `127.0.0.1:${client.localPort}`);
    activity.touch('inst-b', '127.0.0.1:1');
    await activity.flush();
    // Then only the one whose client is still connected to the edge's port: the same address to another port is not it.
    const other = await connection('127.0.0.1');
    activity.touch('inst-c', `127.0.0.1:${other}`);
    await activity.flush();
    await activity.flush();
    client.destroy();
    await sleep(100);
    await activity.flush();
    expect(reported).toEqual([['inst-a', 'inst-b'], ['inst-c', 'inst-a'], ['inst-a']]);
  });

  it('are reported again after a report failed', async () => {
    let fail = true;
    const reported: string[][] = [];
    const activity = new Activity({
      log,
      port: 1,
      report: async (ids) => {
        if (fail) throw new Error('no provisioner');
        reported.push(ids);
      },
    });
    activity.touch('inst-a');
    await activity.flush();
    fail = false;
    await activity.flush();
    expect(reported).toEqual([['inst-a']]);
  });
});
