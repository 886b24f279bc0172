// Probe: how much of an idle OpenClaw gateway's memory a full garbage collection gives back, and so how much smaller
// a checkpoint image (and an idle agent) could be if the agent were collected before it sleeps (issue #33).
// A bare container as bench/openclaw/run.ts starts it; after BENCH_IDLE_S of idle, the gateway's inspector is opened
// (SIGUSR1), V8's heap read through it, two full collections run (HeapProfiler.collectGarbage), and the container's
// memory read again. Usage (root, the image built): node bench/openclaw/gc-probe.ts [rounds]
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { bareRun, docker, memoryOf, readyz, removeBare, sleep } from './container.ts';

const exec = promisify(execFile);
const ROUNDS = Number(process.argv[2] ?? 2);
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 60);
const PORT = 19482; // the openclaw bench's bare range (19480+)
const limits = { memory_mb: 2048, cpus: 1, pids: 512 };

/** Runs CDP calls against the inspector listening in the container's network namespace. */
async function cdp(pid: number, calls: Array<{ method: string; params?: unknown }>): Promise<unknown[]> {
  const script = `
    const list = await (await fetch('http://127.0.0.1:9229/json/list')).json();
    const ws = new WebSocket(list[0].webSocketDebuggerUrl);
    await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
    const calls = ${JSON.stringify(calls)}; const out = [];
    for (let i = 0; i < calls.length; i++) {
      ws.send(JSON.stringify({ id: i + 1, ...calls[i] }));
      out.push(await new Promise((r) => { ws.onmessage = (m) => { const d = JSON.parse(m.data); if (d.id === i + 1) r(d.result); }; }));
    }
    ws.close(); console.log(JSON.stringify(out));`;
  const { stdout } = await exec('nsenter', ['-t', String(pid), '-n', process.execPath, '--input-type=module', '-e', script], { timeout: 120_000 });
  return JSON.parse(stdout);
}

const heapOf = async (pid: number) => {
  const [r] = (await cdp(pid, [
    { method: 'Runtime.evaluate', params: { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true } },
  ])) as Array<{
    result: { value: string };
  }>;
  const m = JSON.parse(r!.result.value) as Record<string, number>;
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [`${k}_mb`, Math.round(v / 2 ** 20)]));
};

const rows = [];
for (let round = 1; round <= ROUNDS; round++) {
  const name = `ah-gcprobe-${randomBytes(3).toString('hex')}`;
  try {
    await bareRun({
      name,
      port: PORT,
      label: 'agenthost.bench=gc-probe',
      limits,
      image: 'agenthost/openclaw:latest',
      token: randomBytes(24).toString('hex'),
      heapMb: 1536,
    });
    if (!(await readyz(PORT, Date.now() + 240_000))) throw new Error('not ready');
    await sleep(IDLE_S * 1000);
    const top = (await docker('top', name, '-eo', 'pid,args')).split('\n').slice(1);
    const gw = Number(
      top
        .find((l) => l.includes('openclaw-gateway'))
        ?.trim()
        .split(/\s+/)[0],
    );
    const before = await memoryOf(name);
    process.kill(gw, 'SIGUSR1');
    await sleep(1000);
    const heapBefore = await heapOf(gw);
    const t0 = Date.now();
    await cdp(gw, [{ method: 'HeapProfiler.collectGarbage' }, { method: 'HeapProfiler.collectGarbage' }]);
    const gcMs = Date.now() - t0;
    await sleep(2000);
    const heapAfter = await heapOf(gw);
    const after = await memoryOf(name);
    const row = { round, gateway_pid: gw, before, after, heap_before: heapBefore, heap_after: heapAfter, gc_ms: gcMs };
    rows.push(row);
    console.log(JSON.stringify(row));
  } finally {
    await removeBare(name);
  }
}
