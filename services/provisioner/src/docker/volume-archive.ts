import { AppError } from '@agenthost/shared';
import type { DockerEngine } from './engine.ts';
import { dockerStatus, ignoreGone, o } from './call.ts';
import { AGENT_USER, containerName, dataMount, LABEL_MANAGED, LABEL_SCOPE } from './spec.ts';

/**
 * An instance volume's files in and out through the Engine API's container archive endpoints (never by reading
 * Docker's data directory): GET /containers/{id}/archive?path=/data/. gives the files relative to /data, with
 * their owners; PUT ...?path=/data puts them back. Read while the agent is paused, so its SQLite files are
 * copied as of one moment (the engine reads a paused container's volume as it reads a stopped one's).
 */

/** A backup can take as long as a large volume takes to read; the engine's short call timeout is for the answer's start. */
const ARCHIVE_TIMEOUT_MS = 30 * 60_000;

export async function exportVolume(engine: DockerEngine, id: string, sink: (tar: NodeJS.ReadableStream) => Promise<void>): Promise<void> {
  const c = engine.docker.getContainer(containerName(id));
  let info;
  try {
    info = await engine.run('container inspect', (abortSignal) => c.inspect(o({ abortSignal })));
  } catch (err) {
    if (dockerStatus(err) === 404) throw new AppError('INSTANCE_STATE_CONFLICT', 'The instance has no container to back up; start or restart it first');
    throw err;
  }
  const pause = info.State.Running && !info.State.Paused;
  if (pause) await engine.run('container pause', (abortSignal) => c.pause(o({ abortSignal })));
  try {
    const tar = await engine.run('container archive get', (abortSignal) => c.getArchive(o({ path: '/data/.', abortSignal })), ARCHIVE_TIMEOUT_MS);
    await sink(tar);
  } finally {
    // The agent always resumes, whatever became of the copy.
    if (pause) await ignoreGone(engine.run('container unpause', (abortSignal) => c.unpause(o({ abortSignal }))));
  }
}

/**
 * Put a tar into the instance's volume through a one-shot helper container that only mounts it (never started:
 * no process of the archive runs). The helper runs the instance's own image as the agent's user with the same
 * read-only root as the agent, so the engine writes the files exactly where and as the agent would find them.
 */
export async function importVolume(
  engine: DockerEngine,
  i: { instanceId: string; userId: string; scope: string; image: string },
  tar: NodeJS.ReadableStream,
): Promise<void> {
  const name = helperName(i.instanceId);
  const removeHelper = () => removeRestoreHelper(engine, i.instanceId);
  await removeHelper(); // one a crash left behind
  const body = {
    Image: i.image,
    User: AGENT_USER,
    Entrypoint: ['/bin/true'],
    Cmd: [],
    NetworkDisabled: true,
    Labels: { [LABEL_SCOPE]: i.scope, [LABEL_MANAGED]: 'true', 'agenthost.job': 'restore' },
    HostConfig: { NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true'], Mounts: [dataMount(i)] },
  };
  await engine.run('container create', (abortSignal) => engine.docker.createContainer(o({ _query: { name }, _body: body, abortSignal })));
  try {
    await engine.run(
      'container archive put',
      (abortSignal) => engine.docker.getContainer(name).putArchive(tar, o({ path: '/data', abortSignal })),
      ARCHIVE_TIMEOUT_MS,
    );
  } finally {
    await removeHelper();
  }
}

const helperName = (instanceId: string) => `agenthost-restore-${instanceId}`;

/** The restore helper of an instance, if a crash left one: it holds the volume, which could not be removed while it is there. */
export async function removeRestoreHelper(engine: DockerEngine, instanceId: string): Promise<void> {
  await ignoreGone(engine.run('container remove', (abortSignal) => engine.docker.getContainer(helperName(instanceId)).remove(o({ force: true, abortSignal }))));
}
