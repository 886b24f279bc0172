import { AppError, type contracts } from '@agenthost/shared';
import type { z } from 'zod';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { lastLines } from '../docker/logs.ts';
import { LineReader, parseId, readPage, sinceOf } from '../docker/log-follow.ts';
import { crashView } from './healing.ts';
import { instanceUrl } from './routes.ts';
import type { LocalImages } from './images.ts';
import { upgradeView } from './upgrades.ts';
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
  /** update_available: what the instance's version (and newer ones) of its framework's image repository name now. */
  images: LocalImages;
  frameworkImages: Record<string, string>;
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
    ...(row.image_digest ? { image_digest: row.image_digest } : {}),
    ...(upgradeView(row) ? { upgrade: upgradeView(row)! } : {}),
    ...(row.status === 'sleeping' && row.sleep_depth ? { sleep_depth: row.sleep_depth } : {}),
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
  private readonly deps: LiveViewDeps;

  constructor(deps: LiveViewDeps) {
    this.deps = deps;
  }

  async get(input: { user_id: string; instance_id: string }): Promise<View> {
    const row = await this.owned(input.user_id, input.instance_id);
    const [v, update] = await Promise.all([this.live(row), this.update(row)]);
    return { ...v, ...update };
  }

  /** update_available (and the version to move to): omitted when Docker cannot be asked. */
  private async update(row: InstanceRow): Promise<Pick<View, 'update_available' | 'update_version'>> {
    const repo = Object.hasOwn(this.deps.frameworkImages, row.framework) ? this.deps.frameworkImages[row.framework] : undefined;
    if (!repo || !this.deps.engine.available) return {};
    try {
      const to = await this.deps.images.updateFor(repo, row.version, row.image_digest);
      return { update_available: to !== undefined, ...(to ? { update_version: to } : {}) };
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return {};
    }
  }

  async list(input: { user_id: string }): Promise<{ instances: View[] }> {
    const rows = await this.deps.repo.listOwned(input.user_id);
    return { instances: rows.map((r) => instanceView(r, this.deps.urlTemplate)) };
  }

  async logs(input: { user_id: string; instance_id: string; tail: number }): Promise<{ instance_id: string; lines: string[] }> {
    await this.owned(input.user_id, input.instance_id);
    const text = await this.deps.runtime.logs(input.instance_id, input.tail);
    return { instance_id: input.instance_id, lines: lastLines(text, input.tail) };
  }

  /** One page of a log follow (see contracts.provisioner.logsPage); the stream is closed before the answer. */
  async logsPage(input: contracts.provisioner.LogsPageInput): Promise<contracts.provisioner.LogsPageOutput> {
    const from = input.after
      ? { since: sinceOf(parseId(input.after).ts) }
      : input.since !== undefined
        ? { since: input.since.toFixed(9) }
        : { tail: input.tail };
    await this.owned(input.user_id, input.instance_id);
    const stream = await this.deps.runtime.followLogs(input.instance_id, from);
    if (!stream) return { instance_id: input.instance_id, lines: [], running: false };
    const page = await readPage(stream, new LineReader(input.after), input.limit, input.wait_ms);
    return { instance_id: input.instance_id, lines: page.lines, running: !page.ended };
  }

  async usage(input: { user_id: string }): Promise<z.input<typeof contracts.provisioner.usage.output>> {
    const [u, rows] = await Promise.all([this.deps.repo.usage(input.user_id), this.deps.repo.listOwned(input.user_id)]);
    // Live figures of the running agents from the stats sampler (background-sampled once asked for, like the status).
    const live = await Promise.all(rows.filter((r) => r.status === 'running').map((r) => this.deps.stats.current(r.id).catch(() => undefined)));
    const round2 = (n: number) => Math.round(n * 100) / 100;
    return {
      instances_active: u.instances,
      storage_used_mb: round2(u.bytes / (1024 * 1024)),
      restarts: rows.reduce((n, r) => n + r.restarts, 0),
      oom_kills: rows.reduce((n, r) => n + r.oom_kills, 0),
      cpu_usage_percent: round2(live.reduce((n, l) => n + (l?.cpu_usage_percent ?? 0), 0)),
      memory_usage_mb: round2(live.reduce((n, l) => n + (l?.memory_usage_mb ?? 0), 0)),
    };
  }

  private async owned(userId: string, instanceId: string): Promise<InstanceRow> {
    const row = await this.deps.repo.owned(userId, instanceId);
    if (!row) throw new AppError('INSTANCE_NOT_FOUND');
    return row;
  }

  /**
   * The stored view plus what Docker knows now: uptime from the container's StartedAt, CPU and memory from its
   * stats. A running instance whose container has died is shown failed at once, and the reconciler is asked to
   * record it. When Docker cannot be reached, the stored view is returned without live figures.
   */
  private async live(row: InstanceRow): Promise<View> {
    const v = instanceView(row, this.deps.urlTemplate);
    const { engine, runtime } = this.deps;
    if (!(row.status === 'running' || row.status === 'provisioning') || !engine.available) return v;
    try {
      const s = await runtime.inspect(row.id);
      if (s.state === 'running') {
        if (s.startedAt !== undefined && Number.isFinite(s.startedAt)) v.uptime_seconds = Math.max(0, Math.floor((Date.now() - s.startedAt) / 1000));
        if (row.status === 'running') {
          const live = await this.deps.stats.current(row.id);
          if (live) Object.assign(v, live);
        }
        return v;
      }
      const reason = deadReason(row, s, runtime.kind);
      if (reason) {
        this.deps.recheck(row.id);
        return { ...v, status: 'failed', uptime_seconds: 0, failure_reason: reason };
      }
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      // Docker became unavailable: the stored view.
    }
    return v;
  }
}
