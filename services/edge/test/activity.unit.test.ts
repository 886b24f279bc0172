import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Activity, establishedRemotes } from '../src/activity.ts';

// The keeper's reading of the kernel's TCP tables (idle sleep counts an open connection to an agent as traffic),
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

  it('count as traffic while open, and not once closed', async () => {
    const port = await connection('127.0.0.1');
    const reported: string[][] = [];
    const activity = new Activity({
      log,
      upstreams: () =>
        new Map([
          [`127.0.0.1:${port}`, 'inst-a'],
          ['127.0.0.1:1', 'inst-b'],
        ]),
      report: async (ids) => void reported.push(ids),
    });
    activity.touch('inst-c');
    await activity.flush();
    expect(reported).toEqual([['inst-c', 'inst-a']]);
    for (const o of open.splice(0)) o instanceof net.Socket ? o.destroy() : o.close();
    await new Promise((r) => setTimeout(r, 100));
    await activity.flush();
    expect(reported).toHaveLength(1);
  });

  it('are reported again after a report failed', async () => {
    let fail = true;
    const reported: string[][] = [];
    const activity = new Activity({
      log,
      upstreams: () => new Map(),
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
