// The levers bench/openclaw/levers.ts measures, by group: each variant changes only what it names against the
// baseline container (run.ts's `bare docker run`). LEVER_IMAGE is the image with a lever built in.
const IMAGE = process.env.BENCH_IMAGE ?? 'agenthost/openclaw:latest';
const LEVER_IMAGE = process.env.LEVER_IMAGE ?? IMAGE;

export interface Variant {
  name: string;
  image?: string;
  env?: Record<string, string>;
  /** Added to NODE_OPTIONS after the heap cap. */
  nodeOptions?: string;
  /** V8 flags NODE_OPTIONS refuses (--optimize-for-size): then node runs openclaw.mjs with them. */
  nodeArgs?: string[];
  cpus?: number;
  /** Once ready, `docker update --cpus` to this (a start on a burst, clamped after): then /readyz and GET / for 10 s. */
  clampTo?: number;
  /** An OpenClaw config written into the volume before the start (outside the timing). */
  config?: Record<string, unknown>;
}

/** What launch.mjs seeds on an instance's first start. */
export const SEEDED = {
  gateway: { mode: 'local', controlUi: { root: '/opt/openclaw/node_modules/openclaw/dist/control-ui' } },
  logging: { maxFileBytes: 16 * 1024 * 1024 },
};
/** Startup plugins for paired node hosts and desktops, and voice, that a hosted gateway leaves out by default. */
const OFF = ['cua-computer', 'linux-node', 'file-transfer', 'geolocation', 'talk-voice'];
/** And those the Control UI uses (hosted canvas documents, the browser dashboard, GitHub link previews): measured only. */
const UI = ['canvas', 'browser', 'github'];
const pluginsOff = (ids: string[]) => ({ ...SEEDED, plugins: { entries: Object.fromEntries(ids.map((id) => [id, { enabled: false }])) } });

export const GROUPS: Record<string, Variant[]> = {
  cache: [
    { name: 'baseline' },
    // OpenClaw's own cache in /tmp: new with each start (tmpfs), written only at exit.
    { name: 'no-cache', env: { NODE_DISABLE_COMPILE_CACHE: '1' } },
    { name: 'compile-cache', image: LEVER_IMAGE },
  ],
  memory: [
    { name: 'baseline' },
    { name: 'arena2', env: { MALLOC_ARENA_MAX: '2' } },
    { name: 'semi1', nodeOptions: '--max-semi-space-size=1' },
    { name: 'semi4', nodeOptions: '--max-semi-space-size=4' },
    { name: 'opt-size', nodeArgs: ['--optimize-for-size'] },
    { name: 'no-cache', env: { NODE_DISABLE_COMPILE_CACHE: '1' } },
    { name: 'arena2+semi1+no-cache', env: { MALLOC_ARENA_MAX: '2', NODE_DISABLE_COMPILE_CACHE: '1' }, nodeOptions: '--max-semi-space-size=1' },
    { name: 'arena2+semi1+opt-size', env: { MALLOC_ARENA_MAX: '2' }, nodeOptions: '--max-semi-space-size=1', nodeArgs: ['--optimize-for-size'] },
  ],
  // The memory levers' start time alone (run with BENCH_IDLE_S=0 and more rounds: no idle minute per sample).
  boot: [
    { name: 'baseline' },
    { name: 'arena2', env: { MALLOC_ARENA_MAX: '2' } },
    { name: 'semi1', nodeOptions: '--max-semi-space-size=1' },
    { name: 'opt-size', nodeArgs: ['--optimize-for-size'] },
    { name: 'arena2+semi1+opt-size', env: { MALLOC_ARENA_MAX: '2' }, nodeOptions: '--max-semi-space-size=1', nodeArgs: ['--optimize-for-size'] },
  ],
  plugins: [
    { name: 'seeded', config: SEEDED },
    { name: 'seeded+5-off', config: pluginsOff(OFF) },
    { name: 'seeded+8-off', config: pluginsOff([...OFF, ...UI]) },
  ],
  cpus: [
    { name: 'cpus-1', cpus: 1 },
    { name: 'cpus-2', cpus: 2 },
    { name: 'cpus-0.5', cpus: 0.5 },
    { name: 'cpus-2-then-0.5', cpus: 2, clampTo: 0.5 },
  ],
  // The image with the levers built in (LEVER_IMAGE: compile cache, MALLOC_ARENA_MAX=2) against the one without
  // (BENCH_IMAGE), and the semi-space sizes the provisioner could add to NODE_OPTIONS.
  // The semi-space sizes' start cost on the built image (run with BENCH_IDLE_S=0 and more rounds).
  semi: [
    { name: 'built', image: LEVER_IMAGE },
    { name: 'built+semi1', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=1' },
    { name: 'built+semi4', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=4' },
  ],
  built: [
    { name: 'before' },
    { name: 'built', image: LEVER_IMAGE },
    { name: 'built+semi1', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=1' },
    { name: 'built+semi2', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=2' },
    { name: 'built+semi4', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=4' },
  ],
  // V8 without its optimizing tiers (an idle gateway waits on the network, not on its own code): code and feedback
  // memory against start time, beside the best combination of the memory group.
  lite: [
    { name: 'built', image: LEVER_IMAGE },
    { name: 'built+semi1+opt-size', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=1', nodeArgs: ['--optimize-for-size'] },
    { name: 'built+lite', image: LEVER_IMAGE, nodeArgs: ['--lite-mode'] },
    { name: 'built+semi1+lite', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=1', nodeArgs: ['--lite-mode'] },
  ],
  // The same through NODE_OPTIONS, which OpenClaw's two helper processes (its spawn broker and its read-only SQLite
  // worker, ~170 MB of an idle agent) inherit: NODE_OPTIONS takes --jitless, not --lite-mode.
  jitless: [
    { name: 'built', image: LEVER_IMAGE },
    { name: 'built+semi1', image: LEVER_IMAGE, nodeOptions: '--max-semi-space-size=1' },
    { name: 'built+jitless+semi1', image: LEVER_IMAGE, nodeOptions: '--jitless --max-semi-space-size=1' },
  ],
};
