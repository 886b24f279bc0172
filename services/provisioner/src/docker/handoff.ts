import { observeContainerEvent } from '../metrics.ts';
import type { Logger } from '@agenthost/shared';
import { o, type DockerEngine } from './engine.ts';
import { containerName, LABEL_INSTANCE, LABEL_SCOPE, LABEL_USER } from './spec.ts';

export interface HandoffCredentials {
  instance_secret: string;
  instance_key: string;
}

/** How long a start we made ourselves is not answered again from Docker's event stream. */
const OWN_START_MS = 30_000;

/**
 * Instance credentials never enter a container's configuration: the container is created with an open
 * stdin, and at every start the provisioner attaches to it and writes one JSON line, which the bootstrap
 * reads before anything else. `docker inspect` shows nothing that can fetch keys.
 *
 * Starts the provisioner makes hand over the credentials they were created with (give). Starts Docker
 * makes on its own (the restart policy after a crash) are seen on the engine's event stream and get
 * fresh credentials from keyvault, so a secret that leaked from a crashed agent dies with it.
 */
export class CredentialHandoff {
  private readonly d: { engine: DockerEngine; log: Logger; scope: string; issue(userId: string, instanceId: string): Promise<HandoffCredentials> };
  private readonly ownStarts = new Map<string, number>();
  private stopped = false;
  private stream: NodeJS.ReadableStream | undefined;

  constructor(deps: CredentialHandoff['d']) {
    this.d = deps;
  }

  /** A start the provisioner is about to make: its event is not answered from the event stream. */
  expectStart(instanceId: string): void {
    this.ownStarts.set(instanceId, Date.now());
  }

  /** Write the credentials to the running container's stdin. */
  async give(instanceId: string, creds: HandoffCredentials): Promise<void> {
    const { engine } = this.d;
    const line = `${JSON.stringify({ instance_secret: creds.instance_secret, instance_key: creds.instance_key })}\n`;
    const stream = (await engine.run('container attach', (abortSignal) =>
      engine.docker.getContainer(containerName(instanceId)).attach(o({ stream: true, stdin: true, stdout: false, stderr: false, hijack: true, abortSignal })),
    )) as NodeJS.ReadWriteStream & { destroy(): void };
    await new Promise<void>((resolve, reject) => {
      stream.once('error', reject);
      stream.write(line, (err) => (err ? reject(err) : resolve()));
    });
    // Detach; the container's stdin stays open (StdinOnce is off), so nothing else reaches the agent.
    stream.end();
    stream.destroy();
  }

  /** Follow the engine's container start events (reconnecting after an engine restart) until stop(). */
  watch(): void {
    void this.follow();
    this.d.engine.onRecovery(() => void this.follow());
  }

  stop(): void {
    this.stopped = true;
    (this.stream as { destroy?: () => void } | undefined)?.destroy?.();
  }

  private async follow(): Promise<void> {
    if (this.stopped || this.stream) return;
    const { engine, log, scope } = this.d;
    try {
      const stream = (await engine.docker.getEvents({ filters: { type: ['container'], event: ['start', 'die', 'oom'], label: [`${LABEL_SCOPE}=${scope}`] } })) as NodeJS.ReadableStream;
      this.stream = stream;
      let buffered = '';
      stream.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        let nl;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (line.trim()) void this.onEvent(line);
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
      log.warn({ err: (err as Error).message }, 'cannot follow the engine events; credentials for restarts Docker makes wait until it answers');
      if (!this.stopped) setTimeout(() => void this.follow(), 2000).unref();
    }
  }

  private async onEvent(line: string): Promise<void> {
    let attrs: Record<string, string> = {};
    let action = '';
    try {
      const ev = JSON.parse(line) as { Action?: string; Actor?: { Attributes?: Record<string, string> } };
      attrs = ev.Actor?.Attributes ?? {};
      action = ev.Action ?? '';
    } catch {
      return;
    }
    const instanceId = attrs[LABEL_INSTANCE];
    const userId = attrs[LABEL_USER];
    if (!instanceId || !userId) return;
    // Exits and OOM kills are only counted (the metrics); starts are ours or the engine's restarts.
    if (action !== 'start') return observeContainerEvent(action, attrs.exitCode, false);
    const own = this.ownStarts.get(instanceId);
    for (const [id, at] of this.ownStarts) if (Date.now() - at > OWN_START_MS) this.ownStarts.delete(id);
    observeContainerEvent('start', undefined, own === undefined);
    if (own !== undefined) {
      // Our own start's event: its credentials were given (or are being given) by the start itself.
      this.ownStarts.delete(instanceId);
      return;
    }
    try {
      await this.give(instanceId, await this.d.issue(userId, instanceId));
      this.d.log.info({ instance_id: instanceId }, 'restarted by the engine: fresh credentials handed over');
    } catch (err) {
      this.d.log.error({ instance_id: instanceId, err: (err as Error).message }, 'could not hand credentials to a container the engine restarted');
    }
  }
}
