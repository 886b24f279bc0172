// Where a swarm create's time goes, per instance, from what the platform itself records: the provisioner's
// "instance created" line (its laps: lock, lease, credentials, container = service create, start = secret and
// replicas 1) and "instance is running" line, and the engines' container events on both nodes, watched live.
import type { manager } from '../../deploy/swarm/test/helpers.ts';
import { demux } from '../../services/provisioner/src/docker/logs.ts';

/** An engine's client (dockerode, as deploy/swarm's helpers make it). */
type Docker = typeof manager;

export interface Phases {
  /** API call → the provisioner set the service to one replica (its laps up to 'start'). */
  api_to_started_ms: number;
  /** Replicas 1 → the engine of the chosen node created the container (scheduling, the instance's overlay on the node). */
  started_to_container_ms: number;
  /** Container create → start on the node. */
  container_create_to_start_ms: number;
  /** Container start → the provisioner's probe found the agent ready. */
  start_to_running_ms: number;
  laps: Record<string, number>;
}

interface LogLine {
  time: string;
  msg: string;
  instance_id?: string;
  ms?: Record<string, number>;
}

/** The provisioner's JSON lines since `since` (unix seconds), from every replica (the engine's frames undone as the provisioner's own log reader does). */
async function provisionerLines(manager: Docker, since: number): Promise<LogLine[]> {
  const raw = (await manager.getService('agenthost-provisioner').logs({ stdout: true, stderr: true, since, timestamps: false })) as unknown;
  const text = Buffer.isBuffer(raw) ? demux(raw) : String(raw);
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

/** Container create/start times (ms) by instance service. */
type ContainerTimes = Map<string, { create?: number; start?: number }>;

/**
 * Watch both nodes' container events from now on (an engine keeps only its last 256 events, so they are read as
 * they happen); stop() ends the watch and gives each instance service's container create and start times.
 */
export async function watchContainers(engines: Docker[]): Promise<{ stop(): ContainerTimes }> {
  const byService: ContainerTimes = new Map();
  const streams = await Promise.all(
    engines.map((d) => d.getEvents({ filters: JSON.stringify({ type: ['container'], event: ['create', 'start'] }) }) as Promise<NodeJS.ReadableStream>),
  );
  for (const stream of streams) {
    let rest = '';
    stream.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString('utf8')).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines.filter(Boolean)) {
        const e = JSON.parse(line) as { Action: string; timeNano: number; Actor: { Attributes: Record<string, string> } };
        const svc = e.Actor.Attributes['com.docker.swarm.service.name'];
        if (!svc?.startsWith('agenthost-inst-')) continue;
        const rec = byService.get(svc) ?? {};
        if (e.Action === 'create') rec.create ??= e.timeNano / 1e6;
        if (e.Action === 'start') rec.start ??= e.timeNano / 1e6;
        byService.set(svc, rec);
      }
    });
  }
  return {
    stop() {
      for (const s of streams) (s as NodeJS.ReadableStream & { destroy(): void }).destroy();
      return byService;
    },
  };
}

/** The phases of each instance created since `since`; `calledAt` holds each instance's API call time (epoch ms). */
export async function breakdown(manager: Docker, events: ContainerTimes, since: number, calledAt: Map<string, number>): Promise<Phases[]> {
  const lines = await provisionerLines(manager, since);
  const out: Phases[] = [];
  for (const [id, t0] of calledAt) {
    const created = lines.find((l) => l.instance_id === id && l.msg === 'instance created');
    const running = lines.find((l) => l.instance_id === id && l.msg === 'instance is running');
    const c = events.get(`agenthost-${id}`);
    if (!created || !running || !c?.create || !c.start) continue;
    // The line is written after the 'record' lap, which follows the start.
    const startedAt = Date.parse(created.time) - (created.ms?.record ?? 0);
    out.push({
      api_to_started_ms: Math.round(startedAt - t0),
      started_to_container_ms: Math.round(c.create - startedAt),
      container_create_to_start_ms: Math.round(c.start - c.create),
      start_to_running_ms: Math.round(Date.parse(running.time) - c.start),
      laps: created.ms ?? {},
    });
  }
  return out;
}

/** The median of each phase (and lap) over the instances. */
export function medians(ps: Phases[]): Record<string, number> {
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length / 2) - 1] ?? Number.NaN;
  const keys = ['api_to_started_ms', 'started_to_container_ms', 'container_create_to_start_ms', 'start_to_running_ms'] as const;
  const out: Record<string, number> = { instances: ps.length };
  for (const k of keys) out[k] = med(ps.map((p) => p[k]));
  for (const lap of new Set(ps.flatMap((p) => Object.keys(p.laps)))) out[`lap_${lap}_ms`] = med(ps.map((p) => p.laps[lap] ?? 0));
  return out;
}
