import { o, type DockerEngine } from '../docker/engine.ts';
import { LABEL_MANAGED, LABEL_SCOPE } from '../docker/spec.ts';

/**
 * A volume lives on its node, and a manager's Engine API cannot remove it there. So a one-shot swarm job
 * on that node does it through the node's own engine: it asks to remove the volume until the instance's
 * container (going away with its service) no longer holds it. The job runs our own image, as root only
 * because the node's Docker socket is root's.
 */
const SCRIPT = `
const http = require('node:http');
const name = process.argv[1];
const del = () => new Promise((res) => {
  const req = http.request({ socketPath: '/var/run/docker.sock', method: 'DELETE', path: '/volumes/' + encodeURIComponent(name) }, (r) => { r.resume(); r.on('end', () => res(r.statusCode)); });
  req.on('error', () => res(0));
  req.end();
});
(async () => {
  for (let i = 0; i < 120; i++) {
    const s = await del();
    if (s === 204 || s === 404) process.exit(0);
    await new Promise((r) => setTimeout(r, 500));
  }
  process.exit(1);
})();
`;

/** A node whose engine socket is not /var/run/docker.sock says where it is with this node label. */
export const SOCKET_LABEL = 'agenthost.docker-socket';

export async function removeVolumeOnNode(engine: DockerEngine, p: { node: string; volume: string; image: string; scope: string; timeoutMs: number }): Promise<boolean> {
  const nodeInfo = await engine.run('node inspect', (abortSignal) => engine.docker.getNode(p.node).inspect(o({ abortSignal })));
  const socket = (nodeInfo.Spec?.Labels as Record<string, string> | undefined)?.[SOCKET_LABEL] ?? '/var/run/docker.sock';
  const name = `agenthost-janitor-${p.volume.slice(-24)}-${Date.now().toString(36)}`;
  const created = (await engine.run('job create', () =>
    engine.docker.createService(
      o({
        Name: name,
        Labels: { [LABEL_MANAGED]: 'true', [LABEL_SCOPE]: p.scope, 'agenthost.janitor': 'true' },
        TaskTemplate: {
          ContainerSpec: {
            Image: p.image,
            User: '0',
            Command: ['/usr/local/bin/node', '-e', SCRIPT, p.volume],
            ReadOnly: true,
            CapabilityDrop: ['ALL'],
            Mounts: [{ Type: 'bind', Source: socket, Target: '/var/run/docker.sock' }],
          },
          Placement: { Constraints: [`node.id == ${p.node}`] },
          RestartPolicy: { Condition: 'none' },
          Resources: { Limits: { MemoryBytes: 128 * 1024 * 1024 } },
        },
        Mode: { ReplicatedJob: { MaxConcurrent: 1, TotalCompletions: 1 } },
      }) as never,
    ),
  )) as { id?: string; ID?: string };
  const id = created.id ?? created.ID ?? name;
  const end = Date.now() + p.timeoutMs;
  let ok = false;
  try {
    while (Date.now() < end) {
      const tasks = await engine.run('task list', (abortSignal) => engine.docker.listTasks(o({ filters: { service: [id] }, abortSignal })));
      const states = tasks.map((t) => t.Status?.State);
      if (states.includes('complete')) {
        ok = true;
        break;
      }
      if (states.some((s) => s === 'failed' || s === 'rejected')) break;
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await engine.run('job remove', (abortSignal) => engine.docker.getService(id).remove(o({ abortSignal }))).catch(() => {});
  }
  return ok;
}
