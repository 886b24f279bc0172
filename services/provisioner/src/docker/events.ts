import type { Logger } from '@agenthost/shared';
import type { DockerEngine } from './engine.ts';
import { LABEL_SCOPE } from './spec.ts';

/** One container event of this scope, as the engine reports it. */
export interface ContainerEvent {
  action: 'start' | 'die' | 'kill' | 'oom';
  /** The container's id. */
  id: string;
  /** The container's labels (and, for die, exitCode; for kill, signal). */
  attrs: Record<string, string>;
}

type Listener = (e: ContainerEvent) => void;

/**
 * The engine's start, kill and die events of this scope's containers, on one stream (followed again after the
 * engine comes back). Starts the engine makes itself need fresh credentials (handoff.ts); deaths need a restart,
 * unless a SIGTERM sent through the engine (`docker stop`) preceded them (domain/healing.ts). An event missed while the stream is down is caught by the reconciler, which looks at
 * every container on its schedule.
 */
export class ContainerEvents {
  /** onResumed: the stream is followed again after it ended, so events may have been missed (the reconciler looks). */
  private readonly deps: { engine: DockerEngine; log: Logger; scope: string; onResumed?: () => void };
  private readonly listeners: { action: ContainerEvent['action']; fn: Listener }[] = [];
  private stream: NodeJS.ReadableStream | undefined;
  private stopped = false;
  private followed = false;

  constructor(deps: ContainerEvents['deps']) {
    this.deps = deps;
  }

  on(action: ContainerEvent['action'], fn: Listener): void {
    this.listeners.push({ action, fn });
  }

  /** Follow the stream until stop(), reconnecting after an engine restart. */
  watch(): void {
    void this.follow();
    this.deps.engine.onRecovery(() => void this.follow());
  }

  stop(): void {
    this.stopped = true;
    (this.stream as { destroy?: () => void } | undefined)?.destroy?.();
  }

  private async follow(): Promise<void> {
    if (this.stopped || this.stream) return;
    const { engine, log, scope } = this.deps;
    try {
      const filters = { type: ['container' as const], event: ['start', 'die', 'kill', 'oom'], label: [`${LABEL_SCOPE}=${scope}`] };
      const stream = (await engine.docker.getEvents({ filters })) as NodeJS.ReadableStream;
      this.stream = stream;
      // A gap: an engine restarted within a second or two fails no call of ours, so nothing else tells the
      // reconciler that the containers' deaths went by unseen (seen: 19 s until its next pass, after a SIGKILL).
      if (this.followed) this.deps.onResumed?.();
      this.followed = true;
      let buffered = '';
      stream.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        let nl;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (line.trim()) this.dispatch(line);
        }
      });
      const ended = () => {
        this.stream = undefined;
        if (!this.stopped && engine.available) setTimeout(() => void this.follow(), 1000).unref();
      };
      stream.once('end', ended);
      stream.once('error', ended);
    } catch (err) {
      this.stream = undefined;
      log.warn({ err: (err as Error).message }, 'cannot follow the engine events; restarts wait for the reconciler until it answers');
      if (!this.stopped) setTimeout(() => void this.follow(), 2000).unref();
    }
  }

  private dispatch(line: string): void {
    let e: { Action?: string; Actor?: { ID?: string; Attributes?: Record<string, string> } };
    try {
      e = JSON.parse(line);
    } catch {
      return;
    }
    const action = e.Action;
    if (action !== 'start' && action !== 'die' && action !== 'kill' && action !== 'oom') return;
    const event: ContainerEvent = { action, id: e.Actor?.ID ?? '', attrs: e.Actor?.Attributes ?? {} };
    for (const l of this.listeners) if (l.action === action) l.fn(event);
  }
}
