import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import { dockerStatus, ignoreGone, o, type DockerEngine } from '../docker/engine.ts';
import type { CredentialHandoff } from '../docker/handoff.ts';
import { containerName, containerSpec } from '../docker/spec.ts';

export interface Credentials {
  instance_secret: string;
  instance_key: string;
  key_id: string;
}

/** The environment variable that carries the OpenClaw gateway token into the container. */
const TOKEN_ENV = 'OPENCLAW_GATEWAY_TOKEN';

/** The Docker side of an instance: its container and volume, by name (every call bounded by the engine). */
export class InstanceContainers {
  private readonly d: { engine: DockerEngine; config: ProvisionerConfig; scope: string; keysUrl(): string; handoff: CredentialHandoff };

  constructor(deps: InstanceContainers['d']) {
    this.d = deps;
  }

  /** The hardened container (and its volume, in the same call) of an instance; its credentials come at start, on stdin. */
  async create(row: InstanceRow, token: string): Promise<string> {
    const { config, engine, scope } = this.d;
    const spec = containerSpec({
      instanceId: row.id,
      userId: row.user_id,
      scope,
      image: row.image,
      network: config.INSTANCE_NETWORK,
      publishHost: config.PUBLISH_HOST,
      port: row.port,
      memoryMb: row.memory_mb,
      cpus: row.cpus,
      pids: row.pids,
      tmpfsMb: config.TMPFS_SIZE_MB,
      restartMaxRetries: config.RESTART_MAX_RETRIES,
      stopTimeoutSeconds: config.STOP_TIMEOUT_SECONDS,
      env: {
        ...config.INSTANCE_EXTRA_ENV_JSON,
        AGENTHOST_INSTANCE_ID: row.id,
        AGENTHOST_CREDENTIALS: 'stdin',
        AGENTHOST_KEYS_URL: this.d.keysUrl(),
        [TOKEN_ENV]: token,
      },
    });
    const { name, ...body } = spec;
    // _query/_body: dockerode would otherwise put the whole spec (with the credentials) in the URL.
    const c = await engine.run('container create', (abortSignal) => engine.docker.createContainer(o({ _query: { name }, _body: body, abortSignal })));
    return c.id;
  }

  /** Start the container and hand it its credentials on stdin (a container already running gets none). */
  async start(id: string, creds: Credentials): Promise<void> {
    const { engine, handoff } = this.d;
    handoff.expectStart(id);
    try {
      await engine.run('container start', (abortSignal) => engine.docker.getContainer(containerName(id)).start(o({ abortSignal })));
    } catch (err) {
      if (dockerStatus(err) === 304) return;
      throw err;
    }
    await handoff.give(id, creds);
  }

  /** The gateway token the running container was given, if the container is still there. */
  async token(id: string): Promise<string | undefined> {
    const { engine } = this.d;
    const info = await ignoreGone(engine.run('container inspect', (abortSignal) => engine.docker.getContainer(containerName(id)).inspect({ abortSignal })));
    const entry = info?.Config?.Env?.find((e) => e.startsWith(`${TOKEN_ENV}=`));
    return entry ? entry.slice(TOKEN_ENV.length + 1) : undefined;
  }

  /** Stop the agent (SIGTERM, then SIGKILL after STOP_TIMEOUT_SECONDS); a missing or stopped container is fine. */
  async stop(id: string): Promise<void> {
    const { engine, config } = this.d;
    await ignoreGone(
      engine.run(
        'container stop',
        (abortSignal) => engine.docker.getContainer(containerName(id)).stop(o({ t: config.STOP_TIMEOUT_SECONDS, abortSignal })),
        config.DOCKER_TIMEOUT_MS + config.STOP_TIMEOUT_SECONDS * 1000,
      ),
    );
  }

  async remove(id: string): Promise<void> {
    const { engine } = this.d;
    await ignoreGone(engine.run('container remove', (abortSignal) => engine.docker.getContainer(containerName(id)).remove(o({ force: true, v: true, abortSignal }))));
  }
}
