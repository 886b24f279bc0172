// The openclaw bench's peer row (run.ts step 1): `openclaw fleet create`, OpenClaw's own way to run isolated tenant
// cells, timed from the command to the cell's first /readyz 200, as the provisioner's create is timed to running.
// The same build: the fleet CLI of the OpenClaw package in the bench's image, run by this host's Node 24, and a cell
// image made from that image with what fleet expects of its own (the package as its working directory, user 1000, the
// state at /home/node/.openclaw, no entrypoint). Fleet runs the cell with --init, no capability, no-new-privileges,
// the given memory, CPUs and pids, its own bridge network and a loopback port; it boots the same gateway.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { docker, readyz } from './container.ts';

const exec = promisify(execFile);
const CACHE = path.join(process.env.AGENTHOST_CACHE || '/var/cache/agenthost', 'bench');

/** The fleet CLI (the image's OpenClaw package, copied out once per image ID) and the cell image made from it. */
export async function prepareFleet(image: string, log: (m: string) => void): Promise<{ cli: string; cellImage: string }> {
  const id = (await docker('image', 'inspect', '-f', '{{.Id}}', image)).replace(/^sha256:/, '').slice(0, 12);
  const dir = path.join(CACHE, `openclaw-${id}`);
  if (!existsSync(path.join(dir, 'node_modules/openclaw/openclaw.mjs'))) {
    log(`copying the OpenClaw package out of ${image} for its fleet CLI`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(CACHE, { recursive: true });
    const c = await docker('create', image);
    try {
      await docker('cp', `${c}:/opt/openclaw`, dir);
    } finally {
      await docker('rm', c);
    }
  }
  const ctx = mkdtempSync(path.join(os.tmpdir(), 'ah-fleet-image-'));
  const cellImage = `agenthost/openclaw-fleet:${id}`;
  writeFileSync(
    path.join(ctx, 'Dockerfile'),
    [
      `FROM ${image}`,
      'USER 0:0',
      'RUN mkdir -p /home/node && chown 1000:1000 /home/node',
      'ENV HOME=/home/node OPENCLAW_STATE_DIR=/home/node/.openclaw',
      'USER 1000:1000',
      'ENTRYPOINT []',
      'WORKDIR /opt/openclaw/node_modules/openclaw',
      '',
    ].join('\n'),
  );
  await docker('build', '-q', '-t', cellImage, ctx);
  rmSync(ctx, { recursive: true, force: true });
  return { cli: path.join(dir, 'node_modules/openclaw/openclaw.mjs'), cellImage };
}

/** One cell: `fleet create` → first /readyz 200 (ms), or undefined when it never answers; the cell is removed after. */
export async function fleetCreate(
  f: { cli: string; cellImage: string },
  o: { tenant: string; port: number; memoryMb: number; cpus: number; pids: number },
): Promise<number | undefined> {
  const home = mkdtempSync(path.join(os.tmpdir(), 'ah-fleet-'));
  const env = { ...process.env, HOME: home, OPENCLAW_STATE_DIR: path.join(home, 'state') };
  const fleet = (...args: string[]) => exec(process.execPath, [f.cli, 'fleet', ...args], { env, cwd: home, maxBuffer: 16 << 20 });
  const t0 = performance.now();
  try {
    await fleet(
      'create',
      o.tenant,
      '--image',
      f.cellImage,
      '--memory',
      `${o.memoryMb}m`,
      '--cpus',
      String(o.cpus),
      '--pids-limit',
      String(o.pids),
      '--port',
      String(o.port),
      '--json',
    );
    return (await readyz(o.port, Date.now() + 240_000)) ? performance.now() - t0 : undefined;
  } finally {
    await fleet('rm', o.tenant, '--force').catch(() => undefined);
    rmSync(home, { recursive: true, force: true });
  }
}
