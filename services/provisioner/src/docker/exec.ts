import type { DockerEngine } from './engine.ts';
import { o } from './call.ts';
import { AGENT_USER, containerName } from './spec.ts';

/** What a command run inside an instance's container said and how it ended. */
export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** More than any answer of the commands run here; a command that writes more is cut there. */
const MAX_OUTPUT_BYTES = 1024 * 1024;

/**
 * Runs `cmd` in the instance's running container as the agent's own user (Engine API exec: no shell, no TTY, no
 * stdin), and collects its output. The engine's timeout covers the whole run, so a command that hangs is a 503.
 */
export async function execInInstance(engine: DockerEngine, instanceId: string, cmd: string[], timeoutMs: number): Promise<ExecResult> {
  const container = engine.docker.getContainer(containerName(instanceId));
  return engine.run(
    'container exec',
    async (abortSignal) => {
      const exec = await container.exec(o({ Cmd: cmd, User: AGENT_USER, AttachStdout: true, AttachStderr: true, Tty: false, abortSignal }));
      const stream = await exec.start(o({ hijack: true, stdin: false, abortSignal }));
      const out: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
      let size = 0;
      let pending = Buffer.alloc(0);
      // The stream is multiplexed (8-byte frame headers: 1 = stdout, 2 = stderr), frames split across chunks.
      await new Promise<void>((resolve, reject) => {
        stream.on('data', (chunk: Buffer) => {
          pending = Buffer.concat([pending, chunk]);
          while (pending.length >= 8) {
            const len = pending.readUInt32BE(4);
            if (pending.length < 8 + len) break;
            const part = pending.subarray(8, 8 + len);
            if (size + part.length <= MAX_OUTPUT_BYTES) (pending[0] === 2 ? out.stderr : out.stdout).push(part);
            size += part.length;
            pending = pending.subarray(8 + len);
          }
        });
        stream.once('end', resolve);
        stream.once('close', resolve);
        stream.once('error', reject);
      });
      const info = await exec.inspect(o({ abortSignal }));
      return { exitCode: info.ExitCode ?? -1, stdout: Buffer.concat(out.stdout).toString('utf8'), stderr: Buffer.concat(out.stderr).toString('utf8') };
    },
    timeoutMs,
  );
}
