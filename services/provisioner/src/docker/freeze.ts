import { readFileSync } from 'node:fs';
import type { DockerEngine } from './engine.ts';
import { dockerStatus, o } from './call.ts';
import { containerName } from './spec.ts';

const MB = 1024 * 1024;
/** A memory limit's change returns once the kernel has reclaimed down to it: seconds on a loaded host, not a plain call's bound. */
const RECLAIM_MS = 60_000;

/**
 * The light sleep of a container (docs/decisions/0052-two-sleep-depths.md). Freezing pauses its processes (the cgroup
 * freezer): they keep their memory, sockets and state, and resume where they were. Its memory may then go out to
 * swap (swapOutStep).
 */
export async function freezeContainer(engine: DockerEngine, id: string): Promise<void> {
  const c = engine.docker.getContainer(containerName(id));
  // The engine answers a pause of a paused container (and an unpause of a running one) with a 500: asked first.
  const { State: state } = await inspect(engine, id);
  if (!state.Running) throw new Error(`its container is ${state.Status}`);
  if (!state.Paused) await engine.run('container pause', (abortSignal) => c.pause(o({ abortSignal })));
}

/**
 * One step of pushing a frozen container's memory out to swap: its memory limit lowered by at most `stepMb`, towards
 * `residentMb`, while its memory+swap limit stays its tier's. The kernel pushes what is over the limit out to swap
 * (only a swap the host keeps off plain disk is used: swap.ts), and the pages come back as the woken agent touches
 * them. In steps because the kernel reclaims inside the engine's update call, which nothing can cut short, and a wake
 * waits for it: ~700 MB took 10-20 s on a loaded 2-core host. `more`: another step is left; `done`: only
 * `residentMb` is resident; `refused`: no room in swap (its limit is its tier's again); `awake`: it is not frozen.
 */
export async function swapOutStep(
  engine: DockerEngine,
  id: string,
  opts: { memoryMb: number; residentMb: number; stepMb: number },
): Promise<'more' | 'done' | 'refused' | 'awake'> {
  const { State: state, HostConfig: host } = await inspect(engine, id);
  if (!state.Running || !state.Paused) return 'awake';
  let limit = Math.floor((host.Memory ?? 0) / MB) || opts.memoryMb;
  if (limit >= opts.memoryMb) {
    // The first step: room for all of it (on cgroup v2 a limit the kernel cannot reclaim down to is met by the OOM
    // killer, not refused), and the steps start from what it holds, not from its tier's limit.
    if (swapFreeMb() < opts.memoryMb) return 'refused';
    limit = Math.min(opts.memoryMb, Math.ceil((await usageBytes(engine, id)) / MB));
  }
  const next = Math.max(opts.residentMb, limit - opts.stepMb);
  try {
    await engine.updateLimits(id, { Memory: next * MB, MemorySwap: opts.memoryMb * MB }, RECLAIM_MS);
  } catch (err) {
    if (dockerStatus(err) === 404) throw err;
    // The kernel could not reclaim down to the limit (swap full): frozen with its memory, the limit as it was.
    await limitTo(engine, id, opts.memoryMb).catch(() => {});
    return 'refused';
  }
  return next > opts.residentMb ? 'more' : 'done';
}

/** The memory a container's cgroup holds now (bytes), as the engine reads it. */
async function usageBytes(engine: DockerEngine, id: string): Promise<number> {
  const st = (await engine.run('container stats', (abortSignal) =>
    engine.docker.getContainer(containerName(id)).stats(o({ stream: false, 'one-shot': true, abortSignal })),
  )) as unknown as { memory_stats?: { usage?: number } };
  return st.memory_stats?.usage ?? 0;
}

/**
 * Wake a frozen container: its tier's memory limit back (no swap, as at create), then its processes resume. Rejects
 * (with a plain error, not the engine's 503) when its container no longer runs: an engine restart ended it.
 */
export async function thawContainer(engine: DockerEngine, id: string, memoryMb: number): Promise<void> {
  const { State: state } = await inspect(engine, id);
  if (!state.Running) throw new Error(`its container is ${state.Status}`);
  await limitTo(engine, id, memoryMb);
  const c = engine.docker.getContainer(containerName(id));
  if (state.Paused) await engine.run('container unpause', (abortSignal) => c.unpause(o({ abortSignal })));
}

async function inspect(engine: DockerEngine, id: string) {
  try {
    return await engine.run('container inspect', (abortSignal) => engine.docker.getContainer(containerName(id)).inspect({ abortSignal }));
  } catch (err) {
    if (dockerStatus(err) === 404) throw new Error('its container is gone');
    throw err;
  }
}

/** Memory and memory+swap both at the tier's limit: pages already in swap stay there until touched, none go out. */
function limitTo(engine: DockerEngine, id: string, memoryMb: number): Promise<unknown> {
  return engine.updateLimits(id, { Memory: memoryMb * MB, MemorySwap: memoryMb * MB }, RECLAIM_MS);
}

/**
 * Whether someone waits on a frozen container's agent port: a connection its agent has not accepted yet, or a
 * request it has not read. The kernel takes connections for a frozen process (docker-proxy or the edge connected
 * before they knew it sleeps); they would hang until its next wake. Read from the container's own TCP tables.
 */
export async function awaited(engine: DockerEngine, id: string, port: number): Promise<boolean> {
  const pid = (await inspect(engine, id)).State.Pid;
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
