import type { Logger } from '@agenthost/shared';
import type { DockerEngine } from './engine.ts';
import { o } from './call.ts';
import type { ContainerEvents } from './events.ts';
import { containerName, LABEL_INSTANCE } from './spec.ts';

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
 * Starts the provisioner makes (create, restart, the self-healing restart after a crash) hand over the
 * credentials they were issued (give). A start made by someone else (an operator's `docker start`) is seen
 * on the engine's event stream and gets fresh credentials from keyvault.
 */
export class CredentialHandoff {
  private readonly deps: {
    engine: DockerEngine;
    log: Logger;
    /** Fresh credentials for the instance's owner as its row names them (a warm pool agent's label names the pool). */
    issue(instanceId: string): Promise<HandoffCredentials>;
    /**
     * Whether some provisioner replica made this start (it holds the instance's lock while it starts, and the row
     * records when). Every replica sees every start on the event stream: without this, one replica's start looked
     * foreign to the others, which issued fresh credentials and so revoked the ones the agent had just been given.
     */
    startedByAReplica(instanceId: string): Promise<boolean>;
  };
  private readonly ownStarts = new Map<string, number>();

  constructor(deps: CredentialHandoff['deps']) {
    this.deps = deps;
  }

  /** A start the provisioner is about to make: its event is not answered from the event stream. */
  expectStart(instanceId: string): void {
    this.ownStarts.set(instanceId, Date.now());
  }

  /** Write the credentials to the running container's stdin. */
  async give(instanceId: string, creds: HandoffCredentials): Promise<void> {
    const { engine } = this.deps;
    // A warm pool agent has none until a create claims it: its bootstrap waits for them (domain/pool-owner.ts).
    if (!creds.instance_secret) return;
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

  /** Answer the engine's own starts (the restart after a crash) from its event stream. */
  listen(events: ContainerEvents): void {
    events.on('start', (e) => void this.onStart(e.attrs));
  }

  private async onStart(attrs: Record<string, string>): Promise<void> {
    const instanceId = attrs[LABEL_INSTANCE];
    if (!instanceId) return;
    const own = this.ownStarts.get(instanceId);
    for (const [id, at] of this.ownStarts) if (Date.now() - at > OWN_START_MS) this.ownStarts.delete(id);
    if (own !== undefined) {
      // Our own start's event: its credentials were given (or are being given) by the start itself.
      this.ownStarts.delete(instanceId);
      return;
    }
    try {
      if (await this.deps.startedByAReplica(instanceId)) return;
      await this.give(instanceId, await this.deps.issue(instanceId));
      this.deps.log.info({ instance_id: instanceId }, 'restarted by the engine: fresh credentials handed over');
    } catch (err) {
      this.deps.log.error({ instance_id: instanceId, err: (err as Error).message }, 'could not hand credentials to a container the engine restarted');
    }
  }
}
