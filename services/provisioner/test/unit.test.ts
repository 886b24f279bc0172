import { describe, expect, it } from 'vitest';
import { parseConfig } from '@agenthost/shared';
import { provisionerConfig } from '../src/config.ts';
import { firewallRules, hostSubnets, PRIVATE_RANGES } from '../src/docker/firewall.ts';
import { demux, lastLines } from '../src/docker/logs.ts';
import { exitKind, exitReason, restartDelayMs } from '../src/domain/healing.ts';
import { bridgeNameFor } from '../src/docker/network.ts';
import { containerSpec, heapMb } from '../src/docker/spec.ts';

const frame = (type: number, text: string) => {
  const payload = Buffer.from(text);
  const h = Buffer.alloc(8);
  h[0] = type;
  h.writeUInt32BE(payload.length, 4);
  return Buffer.concat([h, payload]);
};

describe('container spec', () => {
  const input = {
    instanceId: 'inst-abc',
    userId: 'u1',
    scope: 's',
    image: 'agenthost/openclaw:1',
    network: 'net',
    publishHost: '127.0.0.1',
    port: 18001,
    memoryMb: 2048,
    cpus: 1.5,
    pids: 512,
    tmpfsMb: 64,
    stopTimeoutSeconds: 5,
    env: { A: '1', NODE_OPTIONS: 'x' },
  };
  const spec = containerSpec(input);

  it('sizes the V8 heap under the memory limit (75 %)', () => {
    expect(heapMb(2048)).toBe(1536);
    expect(heapMb(64)).toBe(48);
    expect(spec.Env).toContain('NODE_OPTIONS=--max-old-space-size=1536');
    expect(spec.Env).not.toContain('NODE_OPTIONS=x');
  });

  it('is hardened and limited', () => {
    expect(spec.User).toBe('10001:10001');
    expect(spec.HostConfig).toMatchObject({
      CapDrop: ['ALL'],
      ReadonlyRootfs: true,
      Privileged: false,
      PidsLimit: 512,
      Memory: 2048 * 2 ** 20,
      MemorySwap: 2048 * 2 ** 20,
      NanoCpus: 1.5e9,
      SecurityOpt: ['no-new-privileges:true'],
      Init: true,
      NetworkMode: 'net',
      PortBindings: { '18789/tcp': [{ HostIp: '127.0.0.1', HostPort: '18001' }] },
    });
    expect(spec.HostConfig!.Binds).toBeUndefined();
    expect(JSON.stringify(spec)).not.toContain('docker.sock');
  });

  it('when checkpointable, runs the image as before under hold-init, with the CRIU runtime read-only and io_uring refused', () => {
    const ckpt = containerSpec({
      ...input,
      checkpoint: { runtimeDir: '/usr/local/lib/agenthost-criu', seccomp: '{"defaultAction":"SCMP_ACT_ERRNO"}', entrypoint: ['/bin/boot', 'a'], cmd: ['run'] },
    });
    expect(ckpt.Entrypoint).toEqual(['/opt/agenthost-criu/hold-init', '/bin/boot', 'a']);
    expect(ckpt.Cmd).toEqual(['run']);
    expect(ckpt.HostConfig).toMatchObject({
      Init: false,
      CapDrop: ['ALL'],
      ReadonlyRootfs: true,
      SecurityOpt: ['no-new-privileges:true', 'seccomp={"defaultAction":"SCMP_ACT_ERRNO"}'],
    });
    expect(ckpt.HostConfig!.Mounts!.slice(1)).toEqual([
      { Type: 'bind', Source: '/usr/local/lib/agenthost-criu', Target: '/opt/agenthost-criu', ReadOnly: true },
    ]);
    // Without it, the image's own entrypoint and command stand, under docker-init.
    expect(spec.Entrypoint).toBeUndefined();
  });
});

describe('instance firewall rules', () => {
  const rules = firewallRules({ bridge: 'ah-x', gatewayPort: 8080, tag: 'agenthost:net', dnsServers: ['10.255.255.53'] });
  const input = rules.filter((r) => r.chain === 'INPUT').map((r) => r.rule.join(' '));
  const fwd = rules.filter((r) => r.chain === 'DOCKER-USER').map((r) => r.rule.join(' '));

  it('lets instances reach only the gateway port (and DNS) on the host, dropping the rest last', () => {
    expect(input[0]).toMatch(/--ctstate RELATED,ESTABLISHED .* -j ACCEPT$/);
    expect(input[1]).toMatch(/^-i ah-x -p tcp -m tcp --dport 8080 .* -j ACCEPT$/);
    expect(input.at(-1)).toBe('-i ah-x -m comment --comment agenthost:net -j DROP');
    expect(input.filter((r) => r.includes('--dport 53'))).toHaveLength(2);
  });

  it('drops forwarded traffic to private ranges, after replies and DNS', () => {
    expect(fwd[0]).toMatch(/RELATED,ESTABLISHED .* -j RETURN$/);
    expect(fwd.slice(-PRIVATE_RANGES.length)).toEqual(PRIVATE_RANGES.map((r) => `-i ah-x -d ${r} -m comment --comment agenthost:net -j DROP`));
    expect(bridgeNameFor('agenthost-instances').length).toBeLessThanOrEqual(15);
  });

  it("also drops the special-purpose ranges and the host's own connected subnets", () => {
    for (const r of ['0.0.0.0/8', '192.0.0.0/24', '192.0.2.0/24', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24']) expect(PRIVATE_RANGES).toContain(r);
    const withHost = firewallRules({ bridge: 'ah-x', gatewayPort: 8080, tag: 't', dnsServers: [], hostSubnets: ['11.22.33.0/24', '10.0.0.0/8'] });
    const drops = withHost.filter((r) => r.chain === 'DOCKER-USER' && r.rule.at(-1) === 'DROP').map((r) => r.rule[3]);
    expect(drops).toContain('11.22.33.0/24');
    expect(drops.filter((d) => d === '10.0.0.0/8')).toHaveLength(1);
  });

  it("reads the host's connected subnets from its interfaces, without loopback", () => {
    const subnets = hostSubnets({
      lo: [{ address: '127.0.0.1', netmask: '255.0.0.0', family: 'IPv4', mac: '', internal: true, cidr: '127.0.0.1/8' }],
      eth0: [{ address: '11.22.33.44', netmask: '255.255.255.0', family: 'IPv4', mac: '', internal: false, cidr: '11.22.33.44/24' }],
      eth1: [{ address: '203.0.113.9', netmask: '255.255.255.240', family: 'IPv4', mac: '', internal: false, cidr: '203.0.113.9/28' }],
    });
    expect(subnets).toEqual(['11.22.33.0/24', '203.0.113.0/28']);
  });
});

describe('docker logs', () => {
  it('demultiplexes stdout/stderr frames and keeps the last lines', () => {
    const buf = Buffer.concat([frame(1, 'one\ntwo\n'), frame(2, 'err\n'), frame(1, 'three\n')]);
    expect(lastLines(demux(buf), 2)).toEqual(['err', 'three']);
    expect(lastLines(demux(Buffer.from('plain\ntext\n')), 5)).toEqual(['plain', 'text']);
  });
});

describe('config', () => {
  it('has the documented defaults', () => {
    const c = parseConfig(provisionerConfig, {});
    expect(c).toMatchObject({
      PORT_RANGE_START: 18000,
      PORT_RANGE_END: 19000,
      PUBLISH_HOST: '127.0.0.1',
      INSTANCE_URL_TEMPLATE: 'https://{id}.agenthost.localhost',
      FRAMEWORK_IMAGES: { openclaw: 'agenthost/openclaw' },
      DEFAULT_VERSION: 'latest',
      READY_TIMEOUT_SECONDS: 180,
      INSTANCE_NETWORK: 'agenthost-instances',
      GATEWAY_PORT: 8080,
      RECONCILE_INTERVAL_SECONDS: 30,
      FIREWALL: 'enforce',
    });
    expect(c.TIER_LIMITS_JSON.free.instances).toBe(1);
  });

  it('takes idle sleep times for some tiers (the others never sleep), and refuses an unknown tier or a negative time', () => {
    const defaults = parseConfig(provisionerConfig, {});
    expect(defaults.SLEEP_AFTER_IDLE_SECONDS_JSON).toEqual({ free: 300, pro: 0, enterprise: 0 });
    expect(defaults.DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON).toEqual({ free: 1800, pro: 0, enterprise: 0 });
    expect(parseConfig(provisionerConfig, { SLEEP_AFTER_IDLE_SECONDS_JSON: '{"pro":600}' }).SLEEP_AFTER_IDLE_SECONDS_JSON).toEqual({ pro: 600 });
    for (const bad of ['{"gold":60}', '{"free":-1}', '{"free":1.5}', 'not json']) {
      expect(() => parseConfig(provisionerConfig, { SLEEP_AFTER_IDLE_SECONDS_JSON: bad }), bad).toThrow(
        /SLEEP_AFTER_IDLE_SECONDS_JSON must be a JSON object mapping tiers/,
      );
      expect(() => parseConfig(provisionerConfig, { DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON: bad }), bad).toThrow(
        /DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON must be a JSON object mapping tiers/,
      );
    }
  });

  it('rejects a bad port range and a bad image map', () => {
    expect(() => parseConfig(provisionerConfig, { PORT_RANGE_START: '19000', PORT_RANGE_END: '18000' })).toThrow(/PORT_RANGE_START/);
    expect(() => parseConfig(provisionerConfig, { FRAMEWORK_IMAGES: '{"openclaw":"Bad Image:tag"}' })).toThrow(/FRAMEWORK_IMAGES/);
  });

  it('takes a backup bucket with both halves of its key or neither, and refuses a malformed endpoint', () => {
    expect(parseConfig(provisionerConfig, { BACKUP_S3_BUCKET: 'backups' })).toMatchObject({ BACKUP_S3_BUCKET: 'backups', BACKUP_S3_REGION: 'us-east-1' });
    expect(() => parseConfig(provisionerConfig, { BACKUP_S3_BUCKET: 'backups', BACKUP_S3_ACCESS_KEY_ID: 'AKID' })).toThrow(/BACKUP_S3_ACCESS_KEY_ID/);
    expect(() => parseConfig(provisionerConfig, { BACKUP_S3_BUCKET: 'backups', BACKUP_S3_ENDPOINT: 'minio:9000' })).toThrow(/BACKUP_S3_ENDPOINT/);
  });
});

describe('swarm node address', () => {
  it("is a manager's advertise address, not the local address the engine observed, and the operator's label wins", async () => {
    const { nodeAddr } = await import('../src/swarm/placement.ts');
    const manager = { ID: 'm', Status: { Addr: '192.0.2.2' }, ManagerStatus: { Addr: '10.99.0.1:2377' } };
    expect(nodeAddr(manager)).toBe('10.99.0.1');
    expect(nodeAddr({ ID: 'v6', Status: { Addr: '::1' }, ManagerStatus: { Addr: '[fd00::1]:2377' } })).toBe('fd00::1');
    expect(nodeAddr({ ID: 'w', Status: { Addr: '10.99.0.2' } })).toBe('10.99.0.2');
    expect(nodeAddr({ ...manager, Spec: { Labels: { 'agenthost.addr': '203.0.113.7' } } })).toBe('203.0.113.7');
  });
});

describe('self-healing policy', () => {
  it('doubles the wait before each restart of a crash series, up to the cap', () => {
    const policy = { RESTART_BACKOFF_INITIAL_MS: 1000, RESTART_BACKOFF_MAX_SECONDS: 30 };
    expect([1, 2, 3, 4, 5, 6, 40].map((streak) => restartDelayMs(streak, policy))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  });

  it('names why an agent stopped: out of memory, a signal, or its exit code', () => {
    expect(exitReason({ exitCode: 137, oomKilled: true }, 256)).toBe('killed: out of memory (limit 256 MiB)');
    expect(exitReason({ exitCode: 143 }, 256)).toBe('killed by SIGTERM (exit code 143)');
    expect(exitReason({ exitCode: 3 }, 256)).toBe('exited with code 3');
    // And the same, for machines (status, events): the OOM killer's SIGKILL is not just a signal.
    expect([exitKind({ exitCode: 137, oomKilled: true }), exitKind({ exitCode: 137 }), exitKind({ exitCode: 3 })]).toEqual(['oom_killed', 'signal', 'exit']);
  });
});
