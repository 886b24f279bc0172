import { execFile, spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, recordSecret, repoRoot, testLogDir, waitFor } from '../../packages/testkit/src/index.ts';
import { firewallTag, removeFirewall } from '../../packages/shared/src/index.ts';
import { bare, frames, session, shellBlocks, type Step } from './readme-shell.ts';

// The README's shell lines, pasted as a newcomer pastes them, against a stack `bash deploy/start.sh` starts (in a
// state directory of its own). Verbatim: the stack takes the default addresses the lines use (the gateway on
// 127.0.0.1:8080, the edge on 443 and 80, devchain on 8899) when they are free. When one is taken (a deployment
// runs on this machine), it takes free ports and the lines are pointed at them: AGENTHOST_API_URL and
// SOLANA_RPC_URL for the CLI, the edge's port added to https://agenthost.localhost in the curl lines.
// A README shell line that this file neither runs nor lists in NOT_RUN fails it.

/** Lines deliberately not run, and why. */
const NOT_RUN: Record<string, string> = {
  'bash deploy/test.sh': 'the whole suite, of which this file is one test',
  'pnpm install': 'rewrites node_modules under the running suite; deploy/test.sh installed them before this run',
  'npx vitest run services/gateway/test/webhooks.test.ts': 'a file of the suite, which deploy/test.sh runs',
  'bash bench/run.sh': 'the benchmarks: minutes of the whole machine, each judged against its own baseline, not by a test',
};
/** The line this file runs itself, to start the stack every other line runs against. */
const START = 'bash deploy/start.sh';
const SECTION = { start: 'The two commands', cli: 'A first instance through the CLI', api: 'The API' };

const run = promisify(execFile);
const DOMAIN = 'agenthost.localhost';
const SCOPE = 'readmetest';
const NETWORK = 'agenthost-readmetest';
const CA_IN_README = '/var/lib/agenthost/edge/data/pki/authorities/local/root.crt';

const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
const blocks = shellBlocks(readme);
const state = mkdtempSync(path.join(os.tmpdir(), 'agenthost-readme-'));
const home = mkdtempSync(path.join(os.tmpdir(), 'agenthost-readme-home-'));
let env: NodeJS.ProcessEnv;
let verbatim = false;
let edgeOrigin = `https://${DOMAIN}`;
let started = false;
let startOutput = '';

const bindable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '0.0.0.0', () => srv.close(() => resolve(true)));
  });

/** The newcomer's shell: a fresh HOME, no agenthost settings of the test run's, the repository's root. */
const userEnv = (): NodeJS.ProcessEnv => {
  const e: NodeJS.ProcessEnv = { ...process.env, HOME: home, AGENTHOST_HOME: path.join(home, '.agenthost') };
  for (const k of ['AGENTHOST_API_URL', 'SOLANA_RPC_URL', 'SUBSCRIPTION_PROGRAM_ID', 'TREASURY_ADDRESS', 'CURL_HOME', 'XDG_CONFIG_HOME']) delete e[k];
  if (!verbatim) Object.assign(e, { AGENTHOST_API_URL: `http://127.0.0.1:${env.GATEWAY_PORT}/api`, SOLANA_RPC_URL: `http://127.0.0.1:${env.DEVCHAIN_PORT}` });
  return e;
};
const pointed = (command: string) => (verbatim ? command : command.replaceAll(`https://${DOMAIN}/`, `${edgeOrigin}/`));

beforeAll(async () => {
  verbatim = (await Promise.all([8080, 443, 80, 8899].map(bindable))).every(Boolean);
  env = { ...process.env, AGENTHOST_STATE: state, AGENTHOST_PG_PORT: String(await freePort()), AGENTHOST_NATS_PORT: String(await freePort()) };
  // The operator ports and Prometheus are off: no README line uses them, and the machine's cores are shared.
  Object.assign(env, { METRICS_PORT_BASE: '0', PROMETHEUS_PORT: '0' });
  for (const k of ['DATABASE_URL', 'TEST_DATABASE_URL', 'NATS_URL', 'NATS_AUTH_DIR', 'SOLANA_RPC_URL', 'MASTER_KEY_ENCRYPTION', 'EDGE_DOMAIN']) delete env[k];
  for (const k of ['GATEWAY_PORT', 'EDGE_HTTPS_PORT', 'EDGE_HTTP_PORT', 'DEVCHAIN_PORT']) delete env[k];
  if (!verbatim) {
    const https = await freePort();
    Object.assign(env, { GATEWAY_PORT: String(await freePort()), DEVCHAIN_PORT: String(await freePort()), EDGE_HTTPS_PORT: String(https) });
    env.EDGE_HTTP_PORT = String(await freePort());
    edgeOrigin = `https://${DOMAIN}:${https}`;
    console.warn(`readme.test: a default port is taken; the lines are pointed at ${edgeOrigin} and the gateway on ${env.GATEWAY_PORT}`);
  } else Object.assign(env, { GATEWAY_PORT: '8080', DEVCHAIN_PORT: '8899' });
  chmodSync(state, 0o755); // as /var/lib/agenthost: Postgres's own user must reach its data directory
  // Its instances' scope, network and ports are its own (18300-18309: no other suite uses them); FIREWALL stays on.
  // The key line asserts `applied` with the default wait, as a newcomer gets it.
  writeFileSync(
    path.join(state, 'agenthost.env'),
    [`INSTANCE_SCOPE=${SCOPE}`, `INSTANCE_NETWORK=${NETWORK}`, 'PORT_RANGE_START=18300', 'PORT_RANGE_END=18309'].join('\n'),
  );
  const line = blocks.get(SECTION.start)?.find((c) => bare(c) === START);
  if (!line) throw new Error(`the README no longer says \`${START}\` under "${SECTION.start}"`);
  const out = await run('bash', ['-c', line], { cwd: repoRoot, env, maxBuffer: 64 << 20 });
  startOutput = out.stdout + out.stderr;
  started = true;
}, 600_000);

afterAll(async () => {
  await run('bash', [path.join(repoRoot, 'deploy/stop.sh')], { env }).catch(() => {});
  const ids = (await run('docker', ['ps', '-aq', '--filter', `label=agenthost.scope=${SCOPE}`]).catch(() => ({ stdout: '' }))).stdout
    .split('\n')
    .filter(Boolean);
  if (ids.length) await run('docker', ['rm', '-f', '-v', ...ids]).catch(() => {});
  // The warm pool's agents (deploy/start.sh keeps some) outlive the README's lines, with their volumes.
  const vols = (await run('docker', ['volume', 'ls', '-q', '--filter', `label=agenthost.scope=${SCOPE}`]).catch(() => ({ stdout: '' }))).stdout
    .split('\n')
    .filter(Boolean);
  if (vols.length) await run('docker', ['volume', 'rm', '-f', ...vols]).catch(() => {});
  await run('docker', ['network', 'rm', NETWORK]).catch(() => {});
  await removeFirewall(firewallTag(NETWORK));
  await run('bash', ['-c', `for m in "$1"/*; do umount -l "$m"; done`, '-', path.join(state, 'volumes', SCOPE, 'mnt')]).catch(() => {});
  // Its logs join the run's, for the log scan.
  if (existsSync(path.join(state, 'log')))
    cpSync(path.join(state, 'log'), path.join(testLogDir, started ? 'readme' : 'readme-start-failed'), { recursive: true });
  rmSync(state, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}, 120_000);

describe('the README', () => {
  it('has its lines run here or listed as deliberately not run, each with its reason', () => {
    for (const section of [SECTION.start, SECTION.cli, SECTION.api]) expect(blocks.get(section), section).toBeDefined();
    const runHere = (section: string, command: string) => section === SECTION.cli || section === SECTION.api || bare(command) === START;
    const neither = [...blocks].flatMap(([section, commands]) => commands.filter((c) => !runHere(section, c) && !NOT_RUN[bare(c)]));
    expect(neither, 'README shell lines neither run by readme.test.ts nor listed in its NOT_RUN').toEqual([]);
    const listed = [...blocks.values()].flat().map(bare);
    for (const line of Object.keys(NOT_RUN)) expect(listed, `NOT_RUN lists a line the README no longer has: ${line}`).toContain(line);
  });

  it('starts everything with `bash deploy/start.sh`, which prints the API URL and the local CA where the README says', () => {
    expect(startOutput).toContain(`agenthost is up: ${edgeOrigin}/api`);
    expect(readme).toContain(CA_IN_README);
    expect(existsSync(CA_IN_README.replace('/var/lib/agenthost', state))).toBe(true);
  });
});

const agentHome = () => path.join(home, '.agenthost');
const savedSession = () => JSON.parse(readFileSync(path.join(agentHome(), 'session.json'), 'utf8')) as { token: string; wallet_address: string };
const instanceUrl = (id: string) => edgeOrigin.replace('https://', `https://${id}.`);
let cliId = '';

/** What each line of the CLI block shows when it worked, by the line's start: a new line needs its own. */
const CLI_OUTCOMES: [string, (s: Step) => void | Promise<void>][] = [
  [
    'bin/agenthost wallet create',
    (s) => {
      const file = path.join(agentHome(), 'wallet.json');
      expect(s.out.trim()).toMatch(new RegExp(`^wallet [1-9A-HJ-NP-Za-km-z]{32,44} saved to ${file}$`));
      expect(statSync(file).mode & 0o777).toBe(0o600);
    },
  ],
  ['bin/agenthost airdrop 2', (s) => expect(s.out.trim()).toBe('balance: 2 SOL')],
  [
    'bin/agenthost login',
    (s) => {
      const saved = savedSession();
      expect(s.out.trim()).toMatch(new RegExp(`^signed in as ${saved.wallet_address} \\(user [0-9a-f-]{36}\\) until \\S+$`));
      recordSecret(saved.token);
    },
  ],
  [
    'bin/agenthost subscribe pro',
    (s) => {
      const [first, ...rest] = s.out.trim().split('\n');
      expect(first).toMatch(/^subscribe transaction [1-9A-HJ-NP-Za-km-z]{64,88} confirmed$/);
      expect(JSON.parse(rest.join('\n'))).toMatchObject({ success: true, tx_verified: true, subscription: { tier: 'pro', is_active: true } });
    },
  ],
  [
    'ID=$(bin/agenthost create --name my-agent --wait',
    (s) => {
      // stdout went to $ID (the instance's id), the progress to stderr.
      expect(s.id).toMatch(/^[a-z0-9][a-z0-9-]{2,49}$/);
      cliId = s.id;
      expect(s.err).toContain(`  ${cliId}: `);
    },
  ],
  [
    'bin/agenthost status "$ID"',
    (s) => expect(JSON.parse(s.out)).toMatchObject({ instance_id: cliId, name: 'my-agent', status: 'running', url: instanceUrl(cliId) }),
  ],
  ['bin/agenthost call POST /keys/store', (s) => expect(JSON.parse(s.out), s.out).toMatchObject({ instance_id: cliId, applied: true })],
  [
    'bin/agenthost logs "$ID" --tail 20',
    (s) => {
      const lines = s.out.split('\n').filter(Boolean);
      expect(lines.length).toBeGreaterThan(0);
      expect(lines.length).toBeLessThanOrEqual(20);
    },
  ],
  [
    'bin/agenthost delete "$ID" --wait',
    async (s) => {
      expect(s.out.trim().split('\n').at(-1)).toBe(`${cliId} deleted`);
      expect((await run('docker', ['ps', '-aq', '--filter', `label=agenthost.instance=${cliId}`])).stdout.trim()).toBe('');
    },
  ],
];

describe('A first instance through the CLI: the block pasted into one shell', () => {
  const commands = blocks.get(SECTION.cli) ?? [];
  let steps: Step[] = [];
  beforeAll(async () => {
    steps = await session(commands, { cwd: repoRoot, env: userEnv() });
  }, 320_000);

  for (const [i, command] of commands.entries()) {
    it(bare(command), async () => {
      const s = steps[i]!;
      expect(s.rc, s.rc < 0 ? 'not reached: an earlier line failed' : `exit status (stderr: ${s.err})`).toBe(0);
      const outcome = CLI_OUTCOMES.find(([start]) => bare(command).startsWith(start));
      if (!outcome) expect.fail('no outcome of this README line is asserted: add it to CLI_OUTCOMES');
      await outcome[1](s);
    });
  }
});

describe('The API: the three curl lines through the edge', () => {
  const commands = blocks.get(SECTION.api) ?? [];
  const apiEnv: Record<string, string> = {};
  const line = (what: string) => {
    const c = commands.find((x) => x.includes(what));
    if (!c) throw new Error(`the README's API block has no line calling ${what}`);
    return pointed(c);
  };
  /** One line run to its end: the body, and the status the write-out of ~/.curlrc adds (the line itself prints only the body). */
  const answer = async (command: string) => {
    const { stdout } = await run('bash', ['-c', command], { cwd: repoRoot, env: { ...userEnv(), ...apiEnv } });
    const m = /\n(\d{3})\n$/.exec(stdout);
    return { status: Number(m?.[1]), body: stdout.slice(0, m?.index) };
  };

  beforeAll(() => {
    // CA: the local CA's file above (in this stack's state directory); ADDRESS and TOKEN: the sign-in of the CLI block.
    const saved = savedSession();
    Object.assign(apiEnv, { CA: CA_IN_README.replace('/var/lib/agenthost', state), ADDRESS: saved.wallet_address, TOKEN: saved.token });
    writeFileSync(path.join(home, '.curlrc'), 'write-out = "\\n%{http_code}\\n"\n');
  });

  it('has no line this test does not run', () => {
    expect(commands.filter((c) => !['/api/auth/nonce', '/api/instance/create', '/api/instance/events/'].some((w) => c.includes(w)))).toEqual([]);
  });

  it('asks for a nonce: 200 { nonce, message }', async () => {
    const r = await answer(line('/api/auth/nonce'));
    expect(r.status, r.body).toBe(200);
    const body = JSON.parse(r.body);
    expect(body).toMatchObject({ nonce: expect.any(String), message: expect.stringContaining(apiEnv.ADDRESS!) });
    expect(body.message).toContain(body.nonce);
  });

  it('creates an instance: 200, the instance with its url and access token', async () => {
    const r = await answer(line('/api/instance/create'));
    expect(r.status, r.body).toBe(200);
    const body = JSON.parse(r.body);
    expect(body).toMatchObject({ instance_id: expect.stringMatching(/^[a-z0-9][a-z0-9-]{2,49}$/), name: 'my-agent', framework: 'openclaw' });
    expect(body).toMatchObject({ url: instanceUrl(body.instance_id), access_token: expect.any(String) });
    recordSecret(body.access_token);
    apiEnv.ID = body.instance_id;
  });

  it("streams the instance's events as server-sent events until it is deleted", async () => {
    expect(apiEnv.ID).toBeDefined();
    const id = apiEnv.ID!;
    const curl = spawn('bash', ['-c', line('/api/instance/events/')], { cwd: repoRoot, env: { ...userEnv(), ...apiEnv } });
    let out = '';
    curl.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const ended = new Promise<number | null>((resolve) => curl.once('close', resolve));
    try {
      await waitFor('the instance running in the stream', async () => frames(out).some((f) => f.data.status === 'running'), 240_000, 200);
      // Deleted (as the CLI block does), the instance's stream ends with `deleted`.
      await run('bash', ['-c', 'bin/agenthost delete "$ID" --wait'], { cwd: repoRoot, env: { ...userEnv(), ID: id } });
      expect(await ended).toBe(0);
    } finally {
      if (curl.exitCode === null) curl.kill();
    }
    const got = frames(out);
    expect(got[0]).toMatchObject({ event: 'current', data: { instance_id: id } });
    expect(got.map((f) => f.data.status)).toContain('running');
    expect(got.at(-1)).toMatchObject({ event: 'deleted', data: { instance_id: id } });
    expect(got.every((f) => f.data.instance_id === id)).toBe(true);
    expect(out).toMatch(/\n200\n$/);
  }, 300_000);
});
