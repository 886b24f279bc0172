import { readFileSync } from 'node:fs';
import type { DockerEngine } from './engine.ts';
import { dockerStatus, o } from './call.ts';
import { containerName } from './spec.ts';

const MB = 1024 * 1024;

/**
 * The light sleep of a container (docs/decisions/0052-two-sleep-depths.md). Freezing pauses its processes (the cgroup
 * freezer): they keep their memory, sockets and state, and resume where they were. With `residentMb` the frozen
 * container's memory limit is then lowered to that, while its memory+swap limit stays its tier's: the kernel pushes
 * the rest of its memory out to swap (only a swap the host keeps off plain disk is used: swap.ts), and the pages
 * come back as the woken agent touches them. Returns whether the memory went out; a kernel that cannot reclaim
 * enough (no room in swap) refuses the lower limit, and the container stays frozen with its memory.
 */
export async function freezeContainer(engine: DockerEngine, id: string, opts: { memoryMb: number; residentMb?: number }): Promise<boolean> {
  const c = engine.docker.getContainer(containerName(id));
  // The engine answers a pause of a paused container (and an unpause of a running one) with a 500: asked first.
  const state = await stateOf(engine, id);
  if (!state.Running) throw new Error(`its container is ${state.Status}`);
  if (!state.Paused) await engine.run('container pause', (abortSignal) => c.pause(o({ abortSignal })));
  if (!opts.residentMb || opts.residentMb >= opts.memoryMb) return false;
  // Room for all of it: on cgroup v2 a limit the kernel cannot reclaim down to is met by the OOM killer, not refused.
  if (swapFreeMb() < opts.memoryMb) return false;
  const resident = opts.residentMb;
  try {
    // Pushing ~1 GB out to a compressed swap takes a few seconds on a loaded machine: a longer bound than a plain call.
    await engine.run('container update', (abortSignal) => c.update(o({ Memory: resident * MB, MemorySwap: opts.memoryMb * MB, abortSignal })), 60_000);
    return true;
  } catch (err) {
    if (dockerStatus(err) === 404) throw err;
    // The kernel could not reclaim down to the limit (swap full): frozen with its memory, the limit as it was.
    await limitTo(engine, id, opts.memoryMb).catch(() => {});
    return false;
  }
}

/**
 * Wake a frozen container: its tier's memory limit back (no swap, as at create), then its processes resume. Rejects
 * (with a plain error, not the engine's 503) when its container no longer runs: an engine restart ended it.
 */
export async function thawContainer(engine: DockerEngine, id: string, memoryMb: number): Promise<void> {
  const state = await stateOf(engine, id);
  if (!state.Running) throw new Error(`its container is ${state.Status}`);
  await limitTo(engine, id, memoryMb);
  const c = engine.docker.getContainer(containerName(id));
  if (state.Paused) await engine.run('container unpause', (abortSignal) => c.unpause(o({ abortSignal })));
}

async function stateOf(engine: DockerEngine, id: string) {
  try {
    return (await engine.run('container inspect', (abortSignal) => engine.docker.getContainer(containerName(id)).inspect({ abortSignal }))).State;
  } catch (err) {
    if (dockerStatus(err) === 404) throw new Error('its container is gone');
    throw err;
  }
}

/** Memory and memory+swap both at the tier's limit: pages already in swap stay there until touched, none go out. */
function limitTo(engine: DockerEngine, id: string, memoryMb: number): Promise<unknown> {
  const c = engine.docker.getContainer(containerName(id));
  return engine.run('container update', (abortSignal) => c.update(o({ Memory: memoryMb * MB, MemorySwap: memoryMb * MB, abortSignal })), 60_000);
}

/**
 * Whether someone waits on a frozen container's agent port: a connection its agent has not accepted yet, or a
 * request it has not read. The kernel takes connections for a frozen process (docker-proxy or the edge connected
 * before they knew it sleeps); they would hang until its next wake. Read from the container's own TCP tables.
 */
export async function awaited(engine: DockerEngine, id: string, port: number): Promise<boolean> {
  const pid = (await stateOf(engine, id)).Pid;
  if (!pid) return false;
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 5 || !f[1]!.endsWith(`:${hexPort}`)) continue;
      const rx = Number.parseInt(f[4]!.split(':')[1] ?? '0', 16);
      // 0A LISTEN: rx is its backlog of connections not accepted yet; 01 ESTABLISHED: bytes not read yet.
      if ((f[3] === '0A' || f[3] === '01') && rx > 0) return true;
    }
  }
  return false;
}

/** Free swap on the host now (MB). */
function swapFreeMb(): number {
  try {
    const kb = /^SwapFree:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
    return kb ? Number(kb) / 1024 : 0;
  } catch {
    return 0;
  }
}
