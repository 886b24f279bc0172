import { AppError, type contracts } from '@agenthost/shared';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { lastLines } from '../docker/logs.ts';
import { crashView } from './healing.ts';
import { instanceUrl } from './routes.ts';
import type { InstanceRepo } from './instance-repo.ts';
import { NODE_DOWN, type InstanceRuntime, type RuntimeState } from './runtime.ts';
import type { StatsSampler } from './stats.ts';

type View = contracts.provisioner.InstanceView;

export interface LiveViewDeps {
  repo: InstanceRepo;
  engine: DockerEngine;
  runtime: InstanceRuntime;
  stats: StatsSampler;
  /** INSTANCE_URL_TEMPLATE: {port}, {id} and {host} are filled in. */
  urlTemplate: string;
  /**
   * Ask the reconciler to look at this instance now: the view saw its workload dead. The view answers with what
   * it saw and writes nothing; the reconciler, which owns that transition, records it in the row.
   */
  recheck(instanceId: string): void;
}

/** The stored view of an instance, as the row says. */
export function instanceView(row: InstanceRow, urlTemplate: string): View {
  const live = row.status === 'running' || row.status === 'provisioning';
  return {
    instance_id: row.id,
    name: row.name,
    status: row.status,
    framework: row.framework,
    version: row.version,
    port: row.port,
    url: instanceUrl(urlTemplate, row),
    created_at: row.created_at.toISOString(),
    memory_limit_mb: row.memory_mb,
    last_activity: row.last_activity.toISOString(),
    uptime_seconds: live && row.started_at ? Math.max(0, Math.floor((Date.now() - new Date(row.started_at).getTime()) / 1000)) : 0,
    ...(row.status === 'failed' && row.failure_reason ? { failure_reason: row.failure_reason } : {}),
    ...crashView(row),
  };
}

/**
 * Why a running instance is dead as the live view sees it, or undefined. An exited docker container is not dead
 * here: it is a crash for the self-healing to restart (healing.ts).
 */
function deadReason(row: InstanceRow, s: RuntimeState, runtimeKind: InstanceRuntime['kind']): string | undefined {
  if (row.status !== 'running' || row.step !== 'done') return undefined;
  if (s.state === 'missing') return 'The instance container is missing; restart the instance';
  // The reason the reconciler records for it (reconciler.deadReason): the view and the row never disagree on it.
  if (s.state === 'node_down') return NODE_DOWN;
  if (s.state === 'exited' && runtimeKind !== 'docker') return s.error ?? `The agent exited with code ${s.exitCode}`;
  return undefined;
}

/** The read side of the instance API: status, list, logs and usage. Nothing here writes. */
export class LiveView {
  private readonly d: LiveViewDeps;

  constructor(deps: LiveViewDeps) {
    this.d = deps;
  }

  async get(input: { user_id: string; instance_id: string }): Promise<View> {
    return this.live(await this.owned(input.user_id, input.instance_id));
  }

  async list(input: { user_id: string }): Promise<{ instances: View[] }> {
    const rows = await this.d.repo.listOwned(input.user_id);
    return { instances: rows.map((r) => instanceView(r, this.d.urlTemplate)) };
  }

  async logs(input: { user_id: string; instance_id: string; tail: number }): Promise<{ instance_id: string; lines: string[] }> {
    await this.owned(input.user_id, input.instance_id);
    const text = await this.d.runtime.logs(input.instance_id, input.tail);
    return { instance_id: input.instance_id, lines: lastLines(text, input.tail) };
  }

  async usage(input: { user_id: string }): Promise<{ instances_active: number; storage_used_mb: number }> {
    const u = await this.d.repo.usage(input.user_id);
    return { instances_active: u.instances, storage_used_mb: Math.round((u.bytes / (1024 * 1024)) * 100) / 100 };
  }

  private async owned(userId: string, instanceId: string): Promise<InstanceRow> {
    const row = await this.d.repo.owned(userId, instanceId);
    if (!row) throw new AppError('INSTANCE_NOT_FOUND');
    return row;
  }

  /**
   * The stored view plus what Docker knows now: uptime from the container's StartedAt, CPU and memory from its
   * stats. A running instance whose container has died is shown failed at once, and the reconciler is asked to
   * record it. When Docker cannot be reached, the stored view is returned without live figures.
   */
  private async live(row: InstanceRow): Promise<View> {
    const v = instanceView(row, this.d.urlTemplate);
    const { engine, runtime } = this.d;
    if (!(row.status === 'running' || row.status === 'provisioning') || !engine.available) return v;
    try {
      const s = await runtime.inspect(row.id);
      if (s.state === 'running') {
        if (s.startedAt !== undefined && Number.isFinite(s.startedAt)) v.uptime_seconds = Math.max(0, Math.floor((Date.now() - s.startedAt) / 1000));
        if (row.status === 'running') {
          const live = await this.d.stats.current(row.id);
          if (live) Object.assign(v, live);
        }
        return v;
      }
      const reason = deadReason(row, s, runtime.kind);
      if (reason) {
        this.d.recheck(row.id);
        return { ...v, status: 'failed', uptime_seconds: 0, failure_reason: reason };
      }
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      // Docker became unavailable: the stored view.
    }
    return v;
  }
}
