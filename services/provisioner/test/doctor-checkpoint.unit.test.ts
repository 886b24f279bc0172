import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import type { ProvisionerConfig } from '../src/config.ts';
import type { InstanceRow } from '../src/db/schema.ts';
import { audit } from '../src/doctor/audit.ts';
import { auditContainer } from '../src/doctor/checks.ts';
import { AGENT_PORT, AGENT_USER, CRIU_MOUNT, HOLD_INIT, LABEL_INSTANCE, LABEL_MANAGED, LABEL_SCOPE, LABEL_USER, TOKEN_ENV } from '../src/docker/spec.ts';

// The doctor's reading of a checkpointable container (docs/decisions/0049-...): hold-init as PID 1 in place of
// docker-init and the CRIU runtime mounted read-only are as intended; asleep checkpointed, the container runs
// unpaused with hold-init alone. The inspect fixtures are shaped as Docker returns them for such a container.

const NETWORK = 'agenthost-test';
const IMAGE_ID = `sha256:${'a'.repeat(64)}`;
const intent = { network: NETWORK, publishHost: '127.0.0.1', extraEnv: [] };

const row = (over: Partial<InstanceRow> = {}): InstanceRow =>
  ({
    id: 'inst-ckpt',
    status: 'running',
    step: 'done',
    deleting_at: null,
    sleep_depth: null,
    memory_mb: 256,
    cpus: 0.5,
    pids: 64,
    port: 18801,
    access_token_hash: createHash('sha256').update('tok').digest('hex'),
    image: 'agenthost/openclaw:1',
    image_digest: IMAGE_ID,
    ...over,
  }) as InstanceRow;

type Inspect = Docker.ContainerInspectInfo;
type Mount = Inspect['Mounts'][number];

const criuMount = (over: Partial<Mount> = {}): Mount =>
  ({ Type: 'bind', Source: '/usr/local/lib/agenthost-criu', Destination: CRIU_MOUNT, Mode: 'ro', RW: false, Propagation: 'rprivate', ...over }) as Mount;

/** A checkpointable container as spec.ts makes it; `state`: Docker's State, `edit` changes the rest. */
function checkpointable(state: { Running: boolean; Paused: boolean } = { Running: true, Paused: false }, edit?: (c: Inspect) => void): Inspect {
  const r = row();
  const c = {
    Image: IMAGE_ID,
    State: { Status: state.Running ? (state.Paused ? 'paused' : 'running') : 'exited', ...state },
    Config: {
      User: AGENT_USER,
      Env: [`${TOKEN_ENV}=tok`, `AGENTHOST_INSTANCE_ID=${r.id}`],
      Labels: { [LABEL_INSTANCE]: r.id, [LABEL_USER]: 'u1', [LABEL_MANAGED]: 'true', [LABEL_SCOPE]: NETWORK },
      Entrypoint: [HOLD_INIT, 'docker-entrypoint.sh'],
      Cmd: ['node', 'openclaw.mjs'],
    },
    HostConfig: {
      Init: false,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true', 'seccomp={"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}'],
      ReadonlyRootfs: true,
      RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
      NetworkMode: NETWORK,
      PidsLimit: r.pids,
      Memory: r.memory_mb * 1024 * 1024,
      MemorySwap: r.memory_mb * 1024 * 1024,
      NanoCpus: r.cpus * 1e9,
      PortBindings: { [`${AGENT_PORT}/tcp`]: [{ HostIp: '127.0.0.1', HostPort: String(r.port) }] },
    },
    Mounts: [{ Type: 'volume', Name: `agenthost-${r.id}`, Source: '/var/lib/docker/volumes/x/_data', Destination: '/data', RW: true }, criuMount()],
    NetworkSettings: { Networks: { [NETWORK]: {} } },
  } as unknown as Inspect;
  edit?.(c);
  return c;
}

/** The same container as made without checkpointing: docker-init, the image's entrypoint, no CRIU runtime. */
const dockerInit = (c: Inspect) => {
  (c.HostConfig as { Init?: boolean }).Init = true;
  c.Config.Entrypoint = ['docker-entrypoint.sh'];
  c.Mounts = c.Mounts.filter((m) => m.Destination === '/data');
};

const image = { Id: IMAGE_ID, Config: { Env: ['PATH=/usr/bin'], Labels: {} } } as unknown as Docker.ImageInspectInfo;
const checks = (c: Inspect, r = row()) => auditContainer(r, c, image, intent);

describe('the doctor on a checkpointable container', () => {
  it('passes hold-init as PID 1 and the CRIU runtime mounted read-only, as it passes docker-init', () => {
    expect(checks(checkpointable())).toEqual([]);
    expect(checks(checkpointable(undefined, (c) => (c.Config.Entrypoint = HOLD_INIT)))).toEqual([]);
    expect(checks(checkpointable(undefined, dockerInit))).toEqual([]);
  });

  it('reports a container without docker-init and without hold-init first in its entrypoint as having no init', () => {
    // Without the CRIU runtime, so that only the init is in question.
    const noInit = (entrypoint: string | string[] | undefined) =>
      checks(
        checkpointable(undefined, (c) => {
          c.Config.Entrypoint = entrypoint as string[];
          c.Mounts = c.Mounts.filter((m) => m.Destination === '/data');
        }),
      );
    for (const entrypoint of [['docker-entrypoint.sh'], ['docker-entrypoint.sh', HOLD_INIT], [`${HOLD_INIT}-x`], `${HOLD_INIT}-x`, undefined])
      expect(noInit(entrypoint)).toEqual([expect.objectContaining({ instance_id: 'inst-ckpt', check: 'init', problem: 'has no init process as PID 1' })]);
  });

  it('reports a writable CRIU runtime mount as drift that says it is writable', () => {
    const writable = checks(checkpointable(undefined, (c) => (c.Mounts[1] = criuMount({ RW: true, Mode: 'rw' }))));
    expect(writable).toEqual([
      {
        instance_id: 'inst-ckpt',
        check: 'mounts',
        problem: `mounts /usr/local/lib/agenthost-criu at ${CRIU_MOUNT} writable: the CRIU runtime must be read-only`,
        fix: expect.stringMatching(/^recreate it from the intended spec/),
      },
    ]);
  });

  it('still reports any other mount beside the volume, read-only or not, and a volume at the CRIU runtime’s place', () => {
    const other = checks(checkpointable(undefined, (c) => c.Mounts.push(criuMount({ Source: '/etc', Destination: '/host-etc' }))));
    expect(other).toEqual([expect.objectContaining({ check: 'mounts', problem: 'mounts /etc at /host-etc beside its volume' })]);
    const volume = checks(checkpointable(undefined, (c) => (c.Mounts[1] = criuMount({ Type: 'volume', Source: '/var/lib/docker/volumes/v/_data' }))));
    expect(volume).toEqual([
      expect.objectContaining({ check: 'mounts', problem: `mounts /var/lib/docker/volumes/v/_data at ${CRIU_MOUNT} beside its volume` }),
    ]);
  });
});

/** One instance and its container on an engine that has nothing else: the network as the provisioner keeps it. */
function engine(info: Inspect): Docker {
  return {
    getNetwork: () => ({ inspect: async () => ({ Options: { 'com.docker.network.bridge.enable_icc': 'false' } }) }),
    listContainers: async () => [{ Id: 'c0ffee', Names: ['/agenthost-inst-ckpt'], Labels: info.Config.Labels }],
    listVolumes: async () => ({ Volumes: [] }),
    getContainer: () => ({ inspect: async () => info }),
    getImage: () => ({ inspect: async () => image }),
  } as unknown as Docker;
}

const config = {
  PROVISIONER_DRIVER: 'docker',
  INSTANCE_SCOPE: '',
  INSTANCE_NETWORK: NETWORK,
  PUBLISH_HOST: '127.0.0.1',
  INSTANCE_EXTRA_ENV_JSON: {},
  VOLUME_DIR: '/nonexistent/agenthost-doctor-test',
  FIREWALL: 'off',
} as unknown as ProvisionerConfig;

async function doctor(r: InstanceRow, state: { Running: boolean; Paused: boolean }, edit?: (c: Inspect) => void) {
  return audit({ config, instances: { all: async () => [r] }, docker: engine(checkpointable(state, edit)) });
}

describe('the doctor on an instance asleep', () => {
  const checkpointed = row({ status: 'sleeping', sleep_depth: 'checkpointed' });

  it('reads a checkpointed instance whose container runs unpaused (hold-init alone) as asleep, with no drift', async () => {
    expect(await doctor(checkpointed, { Running: true, Paused: false })).toMatchObject({ ok: true, instances: 1, drift: [], notes: [] });
  });

  it('reports a checkpointed instance whose container exited or is paused, with the fix', async () => {
    expect((await doctor(checkpointed, { Running: false, Paused: false })).drift).toEqual([
      {
        instance_id: 'inst-ckpt',
        check: 'health',
        problem: 'sleeps checkpointed in the database but its container is not running',
        fix: 'none needed if the provisioner runs: its checkpoint is of processes that no longer exist, so the next request boots the agent afresh; otherwise start the provisioner',
      },
    ]);
    expect((await doctor(checkpointed, { Running: true, Paused: true })).drift).toEqual([
      {
        instance_id: 'inst-ckpt',
        check: 'health',
        problem: 'sleeps checkpointed in the database but its container is paused',
        fix: 'docker unpause agenthost-inst-ckpt',
      },
    ]);
  });

  it('keeps the other depths as they were: frozen is paused, stopped does not run', async () => {
    // Containers made without checkpointing, as every frozen or stopped one was before it.
    const drift = async (sleep_depth: 'frozen' | 'stopped', state: { Running: boolean; Paused: boolean }) =>
      (await doctor(row({ status: 'sleeping', sleep_depth }), state, dockerInit)).drift;
    expect(await drift('frozen', { Running: true, Paused: true })).toEqual([]);
    expect(await drift('frozen', { Running: true, Paused: false })).toEqual([
      expect.objectContaining({ check: 'health', problem: 'sleeps frozen in the database but its container is not paused' }),
    ]);
    expect(await drift('stopped', { Running: false, Paused: false })).toEqual([]);
    expect(await drift('stopped', { Running: true, Paused: false })).toEqual([
      expect.objectContaining({ check: 'health', problem: 'is sleeping in the database but its container runs', fix: 'docker stop agenthost-inst-ckpt' }),
    ]);
  });
});
