import { setTimeout as sleep } from 'node:timers/promises';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import { containerName } from '../docker/spec.ts';

/** One reading of an instance's counters: CPU as docker stats gives it (its time and the system's), memory in use. */
export interface Sample {
  at: number;
  cpuTotal: number;
  systemTotal: number;
  onlineCpus: number;
  memoryBytes: number;
}

export interface Live {
  cpu_usage_percent: number;
  memory_usage_mb: number;
}

/**
 * Live CPU and memory of running instances. CPU % needs two samples, so every instance whose status
 * was asked for recently is sampled in the background (Docker's cheap one-shot stats) and the answer
 * comes from the last two samples; the first request for an instance takes two samples 200 ms apart.
 */
export class StatsSampler {
  private readonly engine: DockerEngine;
  private readonly intervalMs: number;
  /** Where a reading comes from: the instance's own engine (docker driver), or its node's edge (swarm/stats.ts). */
  private readonly read: (instanceId: string) => Promise<Sample | undefined>;
  private readonly entries = new Map<string, { prev?: Sample; last?: Sample; wantedAt: number }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(engine: DockerEngine, intervalSeconds: number, read?: (instanceId: string) => Promise<Sample | undefined>) {
    this.engine = engine;
    this.intervalMs = Math.max(1, intervalSeconds) * 1000;
    this.read = read ?? ((id) => this.sampleContainer(id));
  }

  private sample(instanceId: string): Promise<Sample | undefined> {
    return this.read(instanceId).catch(() => undefined);
  }

  async current(instanceId: string): Promise<Live | undefined> {
    const e = this.entries.get(instanceId) ?? { wantedAt: 0 };
    e.wantedAt = Date.now();
    this.entries.set(instanceId, e);
    const fresh = (s?: Sample) => !!s && Date.now() - s.at < this.intervalMs * 2;
    if (!(fresh(e.last) && e.prev && e.last!.at - e.prev.at < 60_000)) {
      const first = await this.sample(instanceId);
      if (!first) return undefined;
      await sleep(200);
      const second = await this.sample(instanceId);
      if (!second) return undefined;
      e.prev = first;
      e.last = second;
    }
    return compute(e.prev!, e.last!);
  }

  forget(instanceId: string): void {
    this.entries.delete(instanceId);
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async tick(): Promise<void> {
    if (!this.engine.available) return;
    const cutoff = Date.now() - 10 * 60_000;
    await Promise.all(
      [...this.entries].map(async ([id, e]) => {
        if (e.wantedAt < cutoff) return void this.entries.delete(id);
        const s = await this.sample(id);
        if (!s) return void this.entries.delete(id);
        e.prev = e.last;
        e.last = s;
      }),
    );
  }

  private async sampleContainer(instanceId: string): Promise<Sample | undefined> {
    try {
      const st = (await this.engine.run('container stats', (abortSignal) =>
        this.engine.docker.getContainer(containerName(instanceId)).stats(o({ stream: false, 'one-shot': true, abortSignal })),
      )) as unknown as DockerStats;
      const cpu = st.cpu_stats;
      if (!cpu?.cpu_usage || cpu.system_cpu_usage === undefined) return undefined;
      const mem = st.memory_stats ?? {};
      const stats = mem.stats ?? {};
      // What `docker stats` shows: usage minus inactive page cache (cgroup v1: total_inactive_file, v2: inactive_file).
      const cache = stats.total_inactive_file ?? stats.inactive_file ?? 0;
      return {
        at: Date.now(),
        cpuTotal: cpu.cpu_usage.total_usage,
        systemTotal: cpu.system_cpu_usage,
        onlineCpus: cpu.online_cpus || cpu.cpu_usage.percpu_usage?.length || 1,
        memoryBytes: Math.max(0, (mem.usage ?? 0) - cache),
      };
    } catch {
      return undefined;
    }
  }
}

function compute(a: Sample, b: Sample): Live {
  const cpuDelta = b.cpuTotal - a.cpuTotal;
  const sysDelta = b.systemTotal - a.systemTotal;
  const cpu = cpuDelta > 0 && sysDelta > 0 ? (cpuDelta / sysDelta) * b.onlineCpus * 100 : 0;
  return { cpu_usage_percent: round2(cpu), memory_usage_mb: round2(b.memoryBytes / (1024 * 1024)) };
}

const round2 = (n: number) => Math.round(n * 100) / 100;

interface DockerStats {
  cpu_stats?: { cpu_usage?: { total_usage: number; percpu_usage?: number[] }; system_cpu_usage?: number; online_cpus?: number };
  memory_stats?: { usage?: number; stats?: Record<string, number> };
}
