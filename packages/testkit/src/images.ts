import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './paths.ts';

const exec = promisify(execFile);

/**
 * An agent image with files of this checkout copied over it (FROM `<repo>:latest`, tagged `<repo>:<tag>`): the
 * agenthost/* tags are shared by every checkout that builds images on a machine, so a suite that needs this
 * checkout's version of a file (the stand-in agent, the OpenClaw launcher) runs this variant. Returns the tag.
 */
export async function checkoutVariant(repo: string, tag: string, files: Array<{ from: string; to: string; mode?: string }>): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-variant-'));
  try {
    const lines = [`FROM ${repo}:latest`, 'USER 0:0'];
    files.forEach((f, i) => {
      copyFileSync(path.join(repoRoot, f.from), path.join(dir, `f${i}`));
      lines.push(`COPY f${i} ${f.to}`, `RUN chmod ${f.mode ?? '0644'} ${f.to}`);
    });
    lines.push('USER 10001:10001', 'LABEL agenthost.test=variant');
    writeFileSync(path.join(dir, 'Dockerfile'), `${lines.join('\n')}\n`);
    await exec('docker', ['build', '-q', '-t', `${repo}:${tag}`, dir], { env: { ...process.env, DOCKER_BUILDKIT: '0' }, timeout: 300_000 });
    return tag;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
