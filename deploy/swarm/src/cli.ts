// The swarm deployment, run on a manager through bin/agenthost-swarm (the project's Node 24; see docs/deploy/swarm.md):
//   bin/agenthost-swarm up [gateway=2 auth=2 ...]   create or update the stack (rolling), wait until it serves
//   bin/agenthost-swarm scale gateway=3 keyvault=2  change replica counts, each service on its own
//   bin/agenthost-swarm status                      running/desired tasks per service
//   bin/agenthost-swarm rebalance                   spread services left on one node after a node was away
//   bin/agenthost-swarm drain <node>                move its instances (with their data), then drain it
//   bin/agenthost-swarm activate <node>             put it back in service and spread the services again
//   bin/agenthost-swarm doctor [--json]             audit every instance and node (exit 1 on drift)
//   bin/agenthost-swarm down [--volumes]            remove the stack (and its volumes on this node)
// Environment: DOCKER_HOST (a manager), AGENTHOST_STATE (secret material, default /var/lib/agenthost),
// EDGE_DOMAIN (agenthost.localhost), EDGE_HTTPS_PORT (443) and EDGE_HTTP_PORT (80) for users, EDGE_PORT (8080: the
// instances' own port of the edge, never open to users), DEVCHAIN_PORT (8899; and the next port), SWARM_DATABASE_URL (an external database: no Postgres
// service), SWARM_SOLANA_RPC_URL (a Solana RPC: no devchain),
// AGENTHOST_ENV_FILE (the services' settings, KEY=VALUE lines: each service gets those it reads), IMAGE_TAG (latest).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pinnedNode } from '@agenthost/shared';
import {
  currentReplicas,
  dockerFrom,
  ensureNetwork,
  ensureSecrets,
  findService,
  imageId,
  pinPostgres,
  pruneSecrets,
  rebalance,
  setReplicas,
  taskCounts,
  upsertService,
  waitConverged,
} from './apply.ts';
import { busPublicKeys, ensureMaterial, NATS_NODES } from './material.ts';
import { runDoctor } from './doctor.ts';
import { ensureEventStream } from './events-check.ts';
import { activateNode, drainNode } from './nodes.ts';
import { unusedNames } from './service-env.ts';
import { NETWORK, STACK, stackSpecs, type ImageName, type StackOptions } from './stack.ts';

const SCALABLE = ['gateway', 'auth', 'billing-chain', 'provisioner', 'keyvault'] as const;
type Scalable = (typeof SCALABLE)[number];
const DEFAULT_REPLICAS: Record<Scalable, number> = { gateway: 2, auth: 2, 'billing-chain': 1, provisioner: 2, keyvault: 2 };

const say = (s: string) => process.stderr.write(`==> ${s}\n`);
const docker = dockerFrom();
const env = process.env;

function parseCounts(args: string[]): Partial<Record<Scalable, number>> {
  const out: Partial<Record<Scalable, number>> = {};
  for (const a of args) {
    const m = /^([a-z-]+)=(\d+)$/.exec(a);
    if (!m || !(SCALABLE as readonly string[]).includes(m[1]!))
      throw new Error(`expected <service>=<replicas> with a service of ${SCALABLE.join(', ')}; got "${a}"`);
    out[m[1] as Scalable] = Number(m[2]);
  }
  return out;
}

function envFile(file: string | undefined): Record<string, string> {
  if (!file || !existsSync(file)) return {};
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!.replace(/^"(.*)"$/, '$1');
  }
  return out;
}

async function up(args: string[]): Promise<void> {
  const asked = parseCounts(args);
  const state = env.AGENTHOST_STATE ?? '/var/lib/agenthost';
  const tag = env.IMAGE_TAG ?? 'latest';
  const refs: Record<ImageName, string> = {
    gateway: `agenthost/gateway:${tag}`,
    auth: `agenthost/auth:${tag}`,
    'billing-chain': `agenthost/billing-chain:${tag}`,
    provisioner: `agenthost/provisioner:${tag}`,
    keyvault: `agenthost/keyvault:${tag}`,
    devchain: `agenthost/devchain:${tag}`,
    postgres: 'agenthost/postgres:15',
    nats: 'agenthost/nats:2.10',
    edge: `agenthost/edge:${tag}`,
  };
  // By image id: a task starts from the image its node has, without asking a registry first.
  const images = Object.fromEntries(await Promise.all(Object.entries(refs).map(async ([k, ref]) => [k, await imageId(docker, ref)]))) as Record<
    ImageName,
    string
  >;
  const replicas = {} as Record<Scalable, number>;
  for (const s of SCALABLE) replicas[s] = asked[s] ?? (await currentReplicas(docker, `${STACK}-${s}`)) ?? DEFAULT_REPLICAS[s];

  say('secrets');
  const edgeDomain = env.EDGE_DOMAIN ?? 'agenthost.localhost';
  const material = ensureMaterial({ dir: path.join(state, 'swarm'), edgeDomain, ...(env.SWARM_DATABASE_URL ? { databaseUrl: env.SWARM_DATABASE_URL } : {}) });
  const secrets = await ensureSecrets(docker, material.secrets);
  await ensureNetwork(docker);
  const postgres = !env.SWARM_DATABASE_URL;
  if (postgres) say(`Postgres pinned to node ${await pinPostgres(docker)}`);
  const opts: StackOptions = {
    images,
    replicas,
    secrets,
    edgePorts: { https: Number(env.EDGE_HTTPS_PORT ?? 443), http: Number(env.EDGE_HTTP_PORT ?? 80), instances: Number(env.EDGE_PORT ?? 8080) },
    edgeDomain,
    devchainPort: Number(env.DEVCHAIN_PORT ?? 8899),
    env: { ...busPublicKeys(material.secrets), ...envFile(env.AGENTHOST_ENV_FILE ?? path.join(state, 'agenthost.env')) },
    postgres,
    ...(env.SWARM_SOLANA_RPC_URL ? { solanaRpcUrl: env.SWARM_SOLANA_RPC_URL } : {}),
    dockerGid: env.DOCKER_GID ?? dockerGid(),
    natsNodes: await natsPlacement(),
  };
  const unused = unusedNames(opts.env);
  if (unused.length) say(`not given to any service (no service reads them): ${unused.join(', ')}`);
  const specs = stackSpecs(opts);
  // Infrastructure first, so that the services find NATS and Postgres when they start.
  const infra = specs.filter((s) => /-(nats-\d|postgres|devchain)$/.test(s.Name));
  for (const spec of infra) say(`${spec.Name}: ${await upsertService(docker, spec)}`);
  await waitConverged(
    docker,
    infra.map((s) => s.Name),
    240_000,
    say,
  );
  const rest = specs.filter((s) => !infra.includes(s));
  for (const spec of rest) say(`${spec.Name}: ${await upsertService(docker, spec)}`);
  await waitConverged(
    docker,
    specs.map((s) => s.Name),
    300_000,
    say,
  );
  await spread();
  // Through this manager's edge, on the instances' port (plain HTTP on every node).
  await ensureEventStream(
    docker,
    `http://127.0.0.1:${opts.edgePorts.instances}/api/health/ready`,
    NATS_NODES.map((n) => `${STACK}-${n}`),
    say,
  );
  await pruneSecrets(docker, new Set(Object.values(secrets).map((s) => s.id)));
  const https = opts.edgePorts.https === 443 ? '' : `:${opts.edgePorts.https}`;
  say(`agenthost is up on every node: https://${opts.edgeDomain}${https}/api (trust ${path.join(state, 'swarm', 'edge-ca.crt')})`);
}

/** Spread the services whose replicas all run on one node (after a node was away), and wait for them. */
async function spread(): Promise<void> {
  const moved = await rebalance(
    docker,
    SCALABLE.map((s) => `${STACK}-${s}`),
    300_000,
    say,
  );
  say(moved.length ? `spread ${moved.join(', ')}` : 'every scaled service already runs on more than one node');
}

/**
 * The node of each NATS server: kept where it is (its store is there), else spread over the ready nodes,
 * managers first: on two nodes the manager holds two of three, so losing the other keeps a quorum.
 */
async function natsPlacement(): Promise<Record<string, string>> {
  const nodes = (await docker.listNodes())
    .filter((n) => n.Status?.State === 'ready' && n.Spec?.Availability === 'active')
    .sort((a, b) => Number(b.Spec?.Role === 'manager') - Number(a.Spec?.Role === 'manager') || a.ID!.localeCompare(b.ID!));
  const out: Record<string, string> = {};
  for (const [i, name] of NATS_NODES.entries()) {
    const svc = await findService(docker, `${STACK}-${name}`);
    const kept = svc && pinnedNode((await svc.inspect()).Spec?.TaskTemplate?.Placement?.Constraints);
    const node = kept ?? nodes[i % nodes.length]?.ID;
    if (node) out[name] = node;
  }
  return out;
}

/** The group of the Docker socket, so that the provisioner reaches the engine without being root. */
function dockerGid(): string {
  const group = readFileSync('/etc/group', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('docker:'));
  return group?.split(':')[2] ?? '0';
}

async function scale(args: string[]): Promise<void> {
  const counts = parseCounts(args);
  if (!Object.keys(counts).length) throw new Error('usage: scale <service>=<replicas>...');
  for (const [svc, n] of Object.entries(counts)) {
    say(`${svc}: ${n} replica(s)`);
    await setReplicas(docker, `${STACK}-${svc}`, n);
  }
  await waitConverged(
    docker,
    Object.keys(counts).map((s) => `${STACK}-${s}`),
    180_000,
    say,
  );
}

async function status(): Promise<void> {
  const services = await docker.listServices({ filters: JSON.stringify({ label: [`agenthost.stack=${STACK}`] }) });
  for (const s of services.sort((a, b) => a.Spec!.Name!.localeCompare(b.Spec!.Name!))) {
    const c = await taskCounts(docker, s.Spec!.Name!);
    process.stdout.write(`${s.Spec!.Name!.padEnd(28)} ${c.running}/${c.desired}${c.updating ? ' updating' : ''}\n`);
  }
}

async function down(args: string[]): Promise<void> {
  const services = await docker.listServices({ filters: JSON.stringify({ label: [`agenthost.stack=${STACK}`] }) });
  for (const s of services) await docker.getService(s.ID).remove();
  say(`removed ${services.length} service(s)`);
  // Tasks take a moment to go; the network and secrets can be removed only then.
  const end = Date.now() + 60_000;
  while (Date.now() < end && (await docker.listTasks({ filters: JSON.stringify({ label: [`agenthost.stack=${STACK}`] }) })).length)
    await new Promise((r) => setTimeout(r, 500));
  await docker
    .getNetwork(NETWORK)
    .remove()
    .catch(() => {});
  await pruneSecrets(docker, new Set());
  if (args.includes('--volumes')) {
    const { Volumes } = await docker.listVolumes();
    for (const v of Volumes.filter((v) => v.Name.startsWith(`${STACK}-`) && (v.Name.includes('nats-') || v.Name.endsWith('-postgres')))) {
      await docker
        .getVolume(v.Name)
        .remove()
        .catch((err: Error) => say(`volume ${v.Name}: ${err.message}`));
    }
  }
}

async function drain(args: string[]): Promise<void> {
  if (args.length !== 1) throw new Error('usage: drain <node id or hostname>');
  await drainNode(docker, args[0]!, Number(env.DRAIN_TIMEOUT_SECONDS ?? 1800) * 1000, say);
}

async function activate(args: string[]): Promise<void> {
  if (args.length !== 1) throw new Error('usage: activate <node id or hostname>');
  await activateNode(docker, args[0]!);
  await spread();
}

async function doctor(args: string[]): Promise<void> {
  process.exitCode = await runDoctor(docker, `${STACK}-provisioner`, args);
}

const [cmd, ...rest] = process.argv.slice(2);
const commands: Record<string, (a: string[]) => Promise<void>> = { up, scale, status, down, rebalance: spread, drain, activate, doctor };
const run = cmd ? commands[cmd] : undefined;
const USAGE =
  'usage: bin/agenthost-swarm up|scale|status|rebalance|drain|activate|doctor|down (see docs/deploy/swarm.md and the top of deploy/swarm/src/cli.ts)\n';
// Help asked for is an answer (exit 0); a command that does not exist is a mistake (exit 2).
if (cmd === 'help' || cmd === '--help' || cmd === '-h') {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (!run) {
  process.stderr.write(USAGE);
  process.exit(2);
}
try {
  await run(rest);
} catch (err) {
  process.stderr.write(`error: ${(err as Error).message}\n`);
  process.exit(1);
}
