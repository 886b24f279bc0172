// Levers on the real OpenClaw image's start and idle memory (decision 0051): each lever against a baseline
// measured in the same round, one container at a time, the order rotated from round to round.
// A container is started as run.ts's `bare docker run` (the provisioner's hardening, the pro tier's limits, the
// plain `openclaw gateway` command); a variant changes only what it names. Per sample: `docker run` → /readyz 200
// (polled every 50 ms), the CPU time the container used until then (cgroup: what a start costs whatever else runs
// on the host, which wall time is not on a shared machine), GET / and /readyz answered 200, then the idle memory
// BENCH_IDLE_S (60) s after ready (Rss and Anonymous of its processes, memoryOf()) and GET / and /readyz again.
//
// Usage: node bench/openclaw/levers.ts <group> [rounds]     groups: cache, memory, boot, semi, plugins, cpus, built, lite, jitless
// Environment: BENCH_IMAGE (agenthost/openclaw:latest; the baseline), LEVER_IMAGE (the image with a lever built in:
// the cache, semi, built, lite and jitless groups), BENCH_IDLE_S, LEVERS_PORT (28801). Results: bench/results/levers-<group>.json.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { docker, dockerQuiet, memoryOf, readyz, sleep } from './container.ts';
import { GROUPS, type Variant } from './lever-variants.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const IMAGE = process.env.BENCH_IMAGE ?? 'agenthost/openclaw:latest';
const LEVER_IMAGE = process.env.LEVER_IMAGE ?? IMAGE;
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 60);
const PORT = Number(process.env.LEVERS_PORT ?? 28801);
const HEAP = '--max-old-space-size=1536'; // heapMb(2048), the pro tier
const TOKEN = randomBytes(24).toString('hex');
const ENTRY = '/opt/openclaw/node_modules/openclaw/openclaw.mjs';

const group = process.argv[2] ?? '';
const variants = GROUPS[group];
if (!variants) {
  process.stderr.write(`usage: node bench/openclaw/levers.ts <${Object.keys(GROUPS).join('|')}> [rounds]\n`);
  process.exit(2);
}
const ROUNDS = Number(process.argv[3] ?? 3);
const log = (msg: string) => process.stderr.write(`[levers:${group}] ${msg}\n`);
const load = () => Math.round(os.loadavg()[0]! * 100) / 100;

async function status(pathname: string): Promise<number> {
  try {
    const r = await fetch(`http://127.0.0.1:${PORT}${pathname}`, { signal: AbortSignal.timeout(10_000) });
    await r.arrayBuffer();
    return r.status;
  } catch {
    return 0;
  }
}

/** CPU time the container used (cgroup v1 cpuacct, else v2 cpu.stat): what a start costs, whatever else runs on the host. */
async function cpuSeconds(id: string): Promise<number> {
  for (const [file, scale, re] of [
    [`/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`, 1e9, /^(\d+)/],
    [`/sys/fs/cgroup/system.slice/docker-${id}.scope/cpu.stat`, 1e6, /^usage_usec (\d+)/m],
  ] as const) {
    try {
      const m = re.exec(readFileSync(file, 'utf8'));
      if (m) return Math.round((Number(m[1]) / scale) * 100) / 100;
    } catch {
      /* not this layout */
    }
  }
  return NaN;
}

async function seedVolume(name: string, image: string, config: Record<string, unknown>): Promise<void> {
  await docker('volume', 'create', name);
  const script = `const fs=require('fs');fs.mkdirSync('/data/home/.openclaw',{recursive:true,mode:0o700});fs.writeFileSync('/data/home/.openclaw/openclaw.json',process.argv[1],{mode:0o600})`;
  await docker(
    'run',
    '--rm',
    '--user',
    '10001:10001',
    '--mount',
    `type=volume,source=${name},target=/data`,
    '--entrypoint',
    '/usr/local/bin/node',
    image,
    '-e',
    script,
    JSON.stringify(config, null, 2),
  );
}

async function sample(v: Variant, name: string) {
  const image = v.image ?? IMAGE;
  if (v.config) await seedVolume(name, image, v.config);
  const command = v.nodeArgs ? ['--entrypoint', '/usr/local/bin/node', image, ...v.nodeArgs, ENTRY] : ['--entrypoint', '/usr/local/bin/openclaw', image];
  const env = Object.entries(v.env ?? {}).flatMap(([k, val]) => ['-e', `${k}=${val}`]);
  const loadBefore = load();
  const t0 = performance.now();
  const id = await docker(
    'run',
    '-d',
    '--name',
    name,
    '--user',
    '10001:10001',
    '--read-only',
    '--tmpfs',
    '/tmp:rw,nosuid,nodev,size=64m,mode=1777',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges:true',
    '--pids-limit',
    '512',
    '--memory',
    '2048m',
    '--memory-swap',
    '2048m',
    '--cpus',
    String(v.cpus ?? 1),
    '-p',
    `127.0.0.1:${PORT}:18789`,
    '--mount',
    `type=volume,source=${name},target=/data`,
    '-e',
    `OPENCLAW_GATEWAY_TOKEN=${TOKEN}`,
    '-e',
    `NODE_OPTIONS=${[HEAP, v.nodeOptions].filter(Boolean).join(' ')}`,
    ...env,
    ...command,
    'gateway',
    '--allow-unconfigured',
    '--bind',
    'lan',
    '--port',
    '18789',
    '--auth',
    'token',
  );
  const ok = await readyz(PORT, Date.now() + 240_000);
  const ready_ms = ok ? Math.round(performance.now() - t0) : NaN;
  const cpu_s = await cpuSeconds(id);
  let clamp: { update_ms: number; nano_cpus: string; served: string[] } | undefined;
  if (v.clampTo && ok) {
    const t1 = performance.now();
    await docker('update', '--cpus', String(v.clampTo), name);
    clamp = { update_ms: Math.round(performance.now() - t1), nano_cpus: await docker('inspect', '-f', '{{.HostConfig.NanoCpus}}', name), served: [] };
    for (let i = 0; i < 5; i++) {
      clamp.served.push(`${await status('/readyz')}/${await status('/')}`);
      await sleep(2000);
    }
  }
  const root = await status('/');
  const ready = await status('/readyz');
  const logs = await docker('logs', name).catch(() => '');
  const plugins = /http server listening \((\d+) plugins: ([^;]*); ([\d.]+)s\)/.exec(logs);
  await sleep(IDLE_S * 1000);
  const mem = await memoryOf(name);
  const after = { root: await status('/'), readyz: await status('/readyz') };
  return {
    variant: v.name,
    ready_ms,
    cpu_s_to_ready: cpu_s,
    ...(clamp ? { clamp } : {}),
    load_1m: loadBefore,
    get_root: root,
    get_readyz: ready,
    after_idle: after,
    plugins: plugins ? Number(plugins[1]) : null,
    plugin_ids: plugins?.[2],
    listening_s: plugins ? Number(plugins[3]) : null,
    ...mem,
  };
}

const med = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const samples: Awaited<ReturnType<typeof sample>>[] = [];
const tag = randomBytes(3).toString('hex');
try {
  for (let r = 0; r < ROUNDS; r++) {
    // Rotated each round: a variant is not always the first (or the last) after the same other one.
    const order = variants.map((_, i) => variants[(i + r) % variants.length]!);
    for (const v of order) {
      const name = `lever-${tag}-${r}-${v.name.replace(/[^a-z0-9.-]/gi, '_')}`;
      try {
        const s = await sample(v, name);
        samples.push(s);
        log(
          `round ${r + 1}/${ROUNDS} ${v.name}: ready ${s.ready_ms} ms (${s.cpu_s_to_ready} CPU-s), rss ${s.rss_mb} MB (anon ${s.anonymous_mb}), ${s.processes} processes, plugins ${s.plugins}, GET / ${s.get_root}, load ${s.load_1m}`,
        );
      } finally {
        await dockerQuiet('rm', '-f', '-v', name);
        await dockerQuiet('volume', 'rm', '-f', name);
      }
    }
  }
} finally {
  const summary = variants.map((v) => {
    const xs = samples.filter((s) => s.variant === v.name);
    return {
      variant: v.name,
      n: xs.length,
      ready_ms_median: Math.round(med(xs.map((s) => s.ready_ms))),
      ready_ms: xs.map((s) => s.ready_ms),
      cpu_s_to_ready_median: Math.round(med(xs.map((s) => s.cpu_s_to_ready)) * 10) / 10,
      cpu_s_to_ready: xs.map((s) => s.cpu_s_to_ready),
      rss_mb_median: Math.round(med(xs.map((s) => s.rss_mb))),
      rss_mb: xs.map((s) => s.rss_mb),
      anonymous_mb_median: Math.round(med(xs.map((s) => s.anonymous_mb))),
      all_served: xs.every((s) => s.get_root === 200 && s.get_readyz === 200 && s.after_idle.root === 200 && s.after_idle.readyz === 200),
    };
  });
  const result = {
    group,
    when: new Date().toISOString(),
    image: IMAGE,
    lever_image: LEVER_IMAGE,
    idle_s: IDLE_S,
    host: { cpus: os.cpus().length, loadavg_1m_end: load(), load_1m_samples: samples.map((s) => s.load_1m) },
    variants,
    summary,
    samples,
  };
  console.log(JSON.stringify(summary, null, 2));
  mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
  writeFileSync(path.join(repo, `bench/results/levers-${group}.json`), `${JSON.stringify(result, null, 2)}\n`);
}
