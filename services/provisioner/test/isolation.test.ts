import { execFile, spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import os from 'node:os';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import {
  startStack,
  type Stack,
  cleanupDocker,
  docker,
  dockerTry,
  gatewayEnv,
  natsClient,
  newUser,
  provisionerEnv,
  testNetwork,
  waitFor,
  type Nats,
} from '@agenthost/testkit';

const P = contracts.provisioner;
const execFileP = promisify(execFile);
const network = testNetwork('iso');
const PIDS = 64;

let stack: Stack;
let n: Nats;
let a: { id: string; port: number };
let b: { id: string; port: number };
let user_id: string;
let hostListener: net.Server;
let hostListenerPort: number;

const cname = (id: string) => `agenthost-${id}`;

/**
 * A neighbour of the host on a subnet it is connected to, outside every private and special-purpose range
 * (as a cloud host's public neighbours are): a network namespace behind a veth, with a TCP listener.
 */
const neighbour = {
  ns: `ahnbr${process.pid % 100000}`,
  hostIf: `ahnb${process.pid % 100000}`,
  hostIp: '11.22.33.1',
  ip: '11.22.33.2',
  port: 8099,
  async up() {
    const run = (args: string[]) => execFileP('ip', args);
    await this.down();
    await run(['netns', 'add', this.ns]);
    await run(['link', 'add', this.hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', this.ns]);
    await run(['addr', 'add', `${this.hostIp}/24`, 'dev', this.hostIf]);
    await run(['link', 'set', this.hostIf, 'up']);
    await run(['-n', this.ns, 'addr', 'add', `${this.ip}/24`, 'dev', 'eth0']);
    await run(['-n', this.ns, 'link', 'set', 'eth0', 'up']);
    await run(['-n', this.ns, 'link', 'set', 'lo', 'up']);
    await run(['-n', this.ns, 'route', 'add', 'default', 'via', this.hostIp]);
    // nsenter, not `ip netns exec` (which remounts /sys): a node listener inside the namespace.
    this.listener = spawn(
      'nsenter',
      [`--net=/run/netns/${this.ns}`, process.execPath, '-e', `require('net').createServer(s=>s.end('hi')).listen(${this.port},'${this.ip}')`],
      { stdio: 'ignore' },
    );
    await waitFor(
      'the neighbour listens',
      async () => {
        return new Promise<boolean>((resolve) =>
          net
            .connect(this.port, this.ip)
            .once('connect', function (this: net.Socket) {
              this.destroy();
              resolve(true);
            })
            .once('error', () => resolve(false)),
        );
      },
      10_000,
      100,
    );
  },
  listener: undefined as ChildProcess | undefined,
  async down() {
    this.listener?.kill('SIGKILL');
    await execFileP('ip', ['link', 'del', this.hostIf]).catch(() => {});
    await execFileP('ip', ['netns', 'del', this.ns]).catch(() => {});
  },
};

/** TCP connect attempts from inside a container: 'open', 'timeout' (dropped) or the error code. */
async function probeFrom(container: string, targets: [string, number][]): Promise<string[]> {
  const script =
    "const net=require('net');const t=JSON.parse(process.argv[1]);Promise.all(t.map(([h,p])=>new Promise(r=>{const s=net.connect({host:h,port:p});" +
    "const k=setTimeout(()=>{s.destroy();r('timeout')},2000);s.on('connect',()=>{clearTimeout(k);s.destroy();r('open')});s.on('error',e=>{clearTimeout(k);r(e.code)})})))" +
    '.then(x=>console.log(JSON.stringify(x)))';
  return JSON.parse(await docker('exec', container, 'node', '-e', script, JSON.stringify(targets)));
}

beforeAll(async () => {
  await cleanupDocker(network);
  // Something listening on every host address, as a careless host service would: instances must not reach it.
  hostListener = net.createServer((s) => {
    s.on('error', () => {});
    s.end('hello\n');
  });
  await new Promise<void>((r) => hostListener.listen(0, '0.0.0.0', r));
  hostListenerPort = (hostListener.address() as net.AddressInfo).port;
  await neighbour.up();
  stack = await startStack({
    services: ['keyvault', 'provisioner'],
    serviceEnv: {
      provisioner: provisionerEnv({ network, ports: [18210, 18229], tiers: { pro: { memory_mb: 256, cpus: 0.5, pids: PIDS } } }),
      gateway: gatewayEnv,
    },
  });
  n = await natsClient(stack.nats);
  user_id = newUser();
  const make = async () => {
    const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    await waitFor('running', async () => (await n.call(P.get, { user_id, instance_id: c.instance_id })).status === 'running');
    return { id: c.instance_id, port: c.port };
  };
  a = await make();
  b = await make();
});

afterAll(async () => {
  await n?.close();
  await stack?.stop();
  await cleanupDocker(network);
  hostListener?.close();
  await neighbour.down();
});

describe('isolation seen from inside an instance', () => {
  it('runs as uid 10001 with no capabilities at all', async () => {
    const status = await docker('exec', cname(a.id), 'cat', '/proc/1/status');
    for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
      expect(status, cap).toMatch(new RegExp(`${cap}:\\s+0000000000000000`));
    }
    expect(status).toMatch(/NoNewPrivs:\s+1/);
    expect(status).toMatch(/Uid:\s+10001\s+10001\s+10001\s+10001/);
    expect(await docker('exec', cname(a.id), 'id', '-u')).toBe('10001');
  });

  it('has a read-only root filesystem; only /tmp (size-limited) and /data are writable', async () => {
    for (const path of ['/probe', '/etc/probe', '/usr/local/bin/probe', '/opt/agenthost/probe']) {
      const r = await dockerTry('exec', cname(a.id), 'sh', '-c', `echo x > ${path}`);
      expect(r.code, path).not.toBe(0);
      expect(r.stderr, path).toMatch(/Read-only file system|Permission denied/);
    }
    expect((await dockerTry('exec', cname(a.id), 'sh', '-c', 'echo x > /probe')).stderr).toMatch(/Read-only file system/);
    expect((await dockerTry('exec', cname(a.id), 'sh', '-c', 'echo x > /tmp/ok && echo x > /data/ok')).code).toBe(0);
    const tooBig = await dockerTry('exec', cname(a.id), 'sh', '-c', 'head -c 80000000 /dev/zero > /tmp/big');
    expect(tooBig.stderr).toMatch(/No space left on device/);
    expect((await dockerTry('exec', cname(a.id), 'test', '-e', '/var/run/docker.sock')).code).not.toBe(0);
  });

  it('reaches the gateway port but not Postgres, NATS, other host services, or another instance', async () => {
    const gw = await docker('network', 'inspect', network, '-f', '{{(index .IPAM.Config 0).Gateway}}');
    const bIp = await docker('inspect', cname(b.id), '-f', `{{(index .NetworkSettings.Networks "${network}").IPAddress}}`);
    // The host's own primary address (not a Docker bridge).
    const hostIp = Object.entries(os.networkInterfaces())
      .filter(([name]) => !/^(docker|br-|ah-|veth|lo)/.test(name))
      .flatMap(([, addrs]) => addrs ?? [])
      .find((x) => x.family === 'IPv4' && !x.internal)?.address;
    const gatewayPort = Number(stack.env.GATEWAY_PORT);
    const targets: [string, number][] = [
      [gw, gatewayPort], // control: the one host service an instance needs
      [gw, 5432], // Postgres
      [gw, 4222], // NATS
      [gw, stack.nats.port], // this stack's NATS
      [gw, hostListenerPort], // a host service listening on 0.0.0.0
      ['172.17.0.1', hostListenerPort], // the same through docker0's address
      [bIp, 18789], // another instance directly
      [gw, b.port], // another instance through its published port
      ['169.254.169.254', 80], // cloud metadata
    ];
    if (hostIp) targets.push([hostIp, hostListenerPort]);
    targets.push([neighbour.ip, neighbour.port]); // a neighbour on a subnet the host is connected to
    const r = await probeFrom(cname(a.id), targets);
    expect(r[0], 'gateway port').toBe('open');
    for (let i = 1; i < targets.length; i++) expect(r[i], `${targets[i]!.join(':')}`).not.toBe('open');
    // Controls from the host: the listener and instance B are up, so "not open" above is the firewall's doing.
    await new Promise<void>((resolve, reject) =>
      net
        .connect(hostListenerPort, gw)
        .once('connect', function (this: net.Socket) {
          this.destroy();
          resolve();
        })
        .once('error', reject),
    );
    expect((await fetch(`http://${bIp}:18789/healthz`)).status).toBe(200);
  });

  it('stops a fork bomb at the pids limit without harming the host', async () => {
    // Count how many processes can be started: fewer than the limit, then EAGAIN.
    const script =
      "const {spawn}=require('child_process');const kids=[];let err='none';function next(){if(kids.length>=1000)return done();let c;try{c=spawn('sleep',['30'])}catch(e){err=e.code;return done()}" +
      "c.on('error',e=>{err=e.code;done()});c.on('spawn',()=>{kids.push(c);next()})}let fin=false;function done(){if(fin)return;fin=true;console.log(JSON.stringify({n:kids.length,err}));for(const k of kids)k.kill('SIGKILL');process.exit(0)}next()";
    const out = JSON.parse(await docker('exec', cname(a.id), 'node', '-e', script));
    expect(out.n).toBeGreaterThan(5);
    expect(out.n).toBeLessThan(PIDS);
    expect(out.err).toBe('EAGAIN');

    // The real thing.
    const full = await docker('inspect', cname(a.id), '-f', '{{.Id}}');
    await dockerTry('exec', '-d', cname(a.id), 'bash', '-c', ':(){ :|:& };:');
    const pidsFile = `/sys/fs/cgroup/pids/docker/${full}/pids.current`;
    const current = await waitFor(
      'fork bomb saturates the pids cgroup',
      async () => {
        const v = Number(readFileSync(pidsFile, 'utf8'));
        return v >= PIDS - 2 ? v : undefined;
      },
      20_000,
      200,
    );
    expect(current).toBeLessThanOrEqual(PIDS);
    expect(Number(readFileSync(`/sys/fs/cgroup/pids/docker/${full}/pids.max`, 'utf8'))).toBe(PIDS);
    // The host is fine, and so is the other instance.
    expect(await docker('exec', cname(b.id), 'echo', 'alive')).toBe('alive');
    // The bombed instance can still be deleted cleanly.
    await n.call(P.remove, { user_id, instance_id: a.id });
    expect((await dockerTry('inspect', cname(a.id))).code).not.toBe(0);
  });
});
