import { AppError, contracts, type Logger } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import { execInInstance, type ExecResult } from '../docker/exec.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { InstanceRuntime } from './runtime.ts';

const D = contracts.devices;
type Device = contracts.devices.Device;

/** The instance's own OpenClaw CLI: it reads and writes the pairing state in the instance's volume. */
const OPENCLAW = '/usr/local/bin/openclaw';
/** Node's start and OpenClaw's module loading take a second or two idle, much more on a loaded host. */
const CLI_TIMEOUT_MS = 60_000; // under the gateway's 70 s for these calls (routes/devices.ts)

/**
 * Device pairing for an instance's owner (contracts/devices.ts): lists the browsers waiting for approval and the
 * paired ones, and approves or rejects a request, by running `openclaw devices` inside the running container.
 * Only what identifies a device is passed on (never a device token), and a request id reaches the command line
 * only after its contract checked it. The swarm driver cannot run a command on another node: 501.
 */
export class DevicePairing {
  private readonly deps: { repo: InstanceRepo; engine: DockerEngine; runtime: Pick<InstanceRuntime, 'kind'>; log: Logger };

  constructor(deps: DevicePairing['deps']) {
    this.deps = deps;
  }

  async list(input: contracts.In<typeof D.list>): Promise<contracts.Out<typeof D.list>> {
    await this.running(input);
    const r = await this.cli(input.instance_id, ['devices', 'list', '--json']);
    if (r.exitCode !== 0) throw this.failed(input.instance_id, 'list', r);
    let parsed: { pending?: unknown; paired?: unknown };
    try {
      parsed = JSON.parse(r.stdout) as typeof parsed;
    } catch {
      throw this.failed(input.instance_id, 'list', r);
    }
    return { instance_id: input.instance_id, pending: devices(parsed.pending), paired: devices(parsed.paired) };
  }

  async decide(input: contracts.In<typeof D.decide>): Promise<contracts.Out<typeof D.decide>> {
    await this.running(input);
    const r = await this.cli(input.instance_id, ['devices', input.decision, input.request_id, '--json']);
    if (r.exitCode !== 0) {
      if (/unknown requestId|no pending device request/i.test(`${r.stdout}\n${r.stderr}`)) throw new AppError('DEVICE_REQUEST_NOT_FOUND');
      throw this.failed(input.instance_id, input.decision, r);
    }
    this.deps.log.info(
      { instance_id: input.instance_id, user_id: input.user_id, request_id: input.request_id, decision: input.decision },
      'device pairing decided',
    );
    return { success: true, instance_id: input.instance_id, request_id: input.request_id, decision: input.decision };
  }

  private async running(input: { user_id: string; instance_id: string }): Promise<void> {
    if (this.deps.runtime.kind !== 'docker') throw new AppError('DEVICES_UNSUPPORTED');
    const row = await this.deps.repo.owned(input.user_id, input.instance_id);
    if (!row) throw new AppError('INSTANCE_NOT_FOUND');
    if (row.status !== 'running') throw new AppError('INSTANCE_STATE_CONFLICT', `Device pairing needs a running instance (it is ${row.status})`);
    this.deps.engine.assertUp();
  }

  private async cli(instanceId: string, args: string[]): Promise<ExecResult> {
    const r = await execInInstance(this.deps.engine, instanceId, [OPENCLAW, ...args], CLI_TIMEOUT_MS);
    // 126/127: the image has no OpenClaw CLI (another framework, or the stand-in agent).
    if (r.exitCode === 126 || r.exitCode === 127) throw new AppError('DEVICES_UNSUPPORTED', "This instance's framework has no device pairing");
    return r;
  }

  private failed(instanceId: string, what: string, r: ExecResult): AppError {
    // Its output stays in the log (it names devices, never a token); the caller gets a retryable 503.
    this.deps.log.warn({ instance_id: instanceId, what, exit_code: r.exitCode, output: `${r.stderr}\n${r.stdout}`.slice(-2000) }, 'openclaw devices failed');
    return new AppError('SERVICE_UNAVAILABLE', 'The instance did not answer its device list; retry shortly', { retryable: true, retryAfter: 2 });
  }
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined);
const time = (v: unknown): string | undefined => (typeof v === 'number' && v > 0 ? new Date(v).toISOString() : str(v));

/** The identifying fields of OpenClaw's device entries, by a name of ours; anything else (tokens) is dropped. */
function devices(list: unknown): Device[] {
  if (!Array.isArray(list)) return [];
  return list
    .filter((e): e is Record<string, unknown> => typeof e === 'object' && e !== null)
    .map((e) => {
      const roles = Array.isArray(e.roles) ? e.roles.filter((x): x is string => typeof x === 'string') : [];
      const scopes = Array.isArray(e.scopes) ? e.scopes.filter((x): x is string => typeof x === 'string') : undefined;
      const d: Device = {
        request_id: str(e.requestId),
        device_id: str(e.deviceId),
        name: str(e.displayName ?? e.name),
        platform: str(e.platform),
        client: str(e.clientId ?? e.clientMode),
        role: str(e.role) ?? roles.join(',') ?? undefined,
        scopes,
        remote_ip: str(e.remoteIp),
        at: time(e.ts ?? e.createdAtMs ?? e.approvedAtMs ?? e.requestedAtMs),
      };
      return Object.fromEntries(Object.entries(d).filter(([, v]) => v !== undefined && v !== '')) as Device;
    });
}
