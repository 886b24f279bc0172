import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './paths.ts';

/**
 * Whether this host can checkpoint an agent: the provisioner's own check (`deploy/criu/checkpoint.sh check`: the
 * CRIU runtime, `criu check`, and a test dump of a sleeping process that must end). A host that cannot (seen before
 * CRIU ran without hardware breakpoints: a PVM guest kernel on which every dump hung) has the provisioner sleep
 * agents deeply by stopping them, which the checkpoint suites then assert instead of the checkpoint itself. Once per
 * test file.
 */
export async function checkpointHost(): Promise<{ ok: true } | { ok: false; why: string }> {
  try {
    await promisify(execFile)('bash', [path.join(repoRoot, 'deploy/criu/checkpoint.sh'), 'check'], { timeout: 60_000 });
    return { ok: true };
  } catch (err) {
    const why = ((err as { stderr?: string }).stderr ?? String(err)).trim().split('\n').at(-1) ?? 'the check failed';
    return { ok: false, why };
  }
}
