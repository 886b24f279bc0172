import type Docker from 'dockerode';
import { PassThrough } from 'node:stream';

/**
 * `cli.ts doctor [--json]`: the provisioner's doctor (services/provisioner/src/doctor), run inside a provisioner task
 * on this manager, so it audits with that replica's own settings, database role and Engine API. Its report goes to
 * stdout; resolves with its exit code (0 no drift, 1 drift, 2 it could not audit).
 */
export async function runDoctor(docker: Docker, service: string, args: string[]): Promise<number> {
  const [task] = await docker.listContainers({ filters: { label: [`com.docker.swarm.service.name=${service}`], status: ['running'] } });
  if (!task) throw new Error(`no task of ${service} runs on this node: run the doctor on a manager that runs the provisioner`);
  const exec = await docker.getContainer(task.Id).exec({
    Cmd: ['/usr/local/bin/node', 'services/provisioner/src/doctor/main.ts', ...args],
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  const out = new PassThrough();
  const err = new PassThrough();
  out.pipe(process.stdout);
  err.pipe(process.stderr);
  docker.modem.demuxStream(stream, out, err);
  await new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  const { ExitCode } = await exec.inspect();
  return ExitCode ?? 2;
}
