#!/usr/bin/env node
import { airdrop, call, cancel, deposit, login, subscribe, walletCreate, walletShow, type Env } from './commands.ts';
import { isTierName } from '@agenthost/subscription-program';
import { parseCommandLine, type CommandLine } from './argv.ts';
import { devices } from './devices.ts';
import { create, events, list, logs, status, verb } from './instances.ts';
import * as webhooks from './webhooks.ts';

const USAGE = `agenthost — command line for the agenthost API

  agenthost wallet create            make a wallet (~/.agenthost/wallet.json)
  agenthost wallet show              print its address
  agenthost airdrop <SOL>            devchain only: fund the wallet
  agenthost login                    sign in with the wallet (Sign-In With Solana)
  agenthost subscribe <tier>         free | pro | enterprise: send the transaction and register it
  agenthost deposit <SOL>            prepay renewals into the subscription account
  agenthost cancel                   cancel (access continues until expiry)
  agenthost create [--name N] [--version V] [--wait]   a new OpenClaw instance (--wait: until it runs, with progress)
  agenthost list                     your instances
  agenthost status <id>              status with CPU, memory, uptime
  agenthost stop|start|restart|delete <id> [--wait]   (--wait: until stopped, running or deleted)
  agenthost logs <id> [-f] [--tail N]   the agent's output; -f follows it (resumes by itself after a drop)
  agenthost events <id>              lifecycle events as they happen, until the instance is deleted
  agenthost devices <id> [approve|reject <request_id>]   browsers waiting to pair with its Control UI, and the paired
  agenthost webhooks listen --forward-to <URL> [--events a,b] [--secret whsec_…]   post your events to a local URL,
                                     signed (Standard Webhooks) with the secret it prints, until Ctrl-C
  agenthost webhooks test <webhook_id>   the gateway sends a signed webhook.test event to that endpoint
  agenthost webhooks list            your webhook endpoints
  agenthost call <METHOD> <PATH> [JSON]   any API call with the saved token
  agenthost doctor [--json]          operator, as root on the host (bin/agenthost): audit every instance container,
                                     the instance network and its firewall against what the provisioner intended;
                                     exit 1 on drift, naming the instance and the fix

Environment: AGENTHOST_API_URL (default http://127.0.0.1:8080/api), SOLANA_RPC_URL (default http://127.0.0.1:8899),
SUBSCRIPTION_PROGRAM_ID and TREASURY_ADDRESS (read from devchain when unset), AGENTHOST_HOME (default ~/.agenthost).`;

const env: Env = {
  apiUrl: process.env.AGENTHOST_API_URL ?? 'http://127.0.0.1:8080/api',
  rpcUrl: process.env.SOLANA_RPC_URL ?? 'http://127.0.0.1:8899',
  out: (line) => process.stdout.write(`${line}\n`),
};

const done = (p: Promise<unknown>) => p.then(() => 0);
/** stop, start, restart and delete: the instance id, and --wait. */
const verbOf =
  (name: 'stop' | 'start' | 'restart' | 'delete') =>
  ({ args: [id], wait }: CommandLine) =>
    id ? done(verb(env, name, id, wait)) : undefined;

/** Each command, run with the words and options it takes; undefined when a word it needs is missing or wrong (exit 2). */
const COMMANDS: Record<string, (c: CommandLine) => Promise<number> | undefined> = {
  create: (c) => done(create(env, { ...(c.name ? { name: c.name } : {}), ...(c.version ? { version: c.version } : {}), wait: c.wait })),
  list: () => done(list(env)),
  status: ({ args: [id] }) => (id ? done(status(env, id)) : undefined),
  stop: verbOf('stop'),
  start: verbOf('start'),
  restart: verbOf('restart'),
  delete: verbOf('delete'),
  logs: ({ args: [id], follow, tail }) => (id ? done(logs(env, id, { follow, ...(tail ? { tail: Number(tail) } : {}) })) : undefined),
  events: ({ args: [id] }) => (id ? done(events(env, id)) : undefined),
  devices: ({ args: [id, decision, requestId] }) => {
    if (id && !decision) return done(devices(env, id));
    if (id && (decision === 'approve' || decision === 'reject') && requestId) return done(devices(env, id, decision, requestId));
  },
  wallet: ({ args: [what] }) => (what === 'create' ? done(walletCreate(env)) : what === 'show' ? done(walletShow(env)) : undefined),
  airdrop: ({ args: [sol] }) => (Number(sol) > 0 ? done(airdrop(env, Number(sol))) : undefined),
  login: () => done(login(env)),
  subscribe: ({ args: [tier] }) => (tier && isTierName(tier) ? done(subscribe(env, tier)) : undefined),
  deposit: ({ args: [sol] }) => (Number(sol) > 0 ? done(deposit(env, Number(sol))) : undefined),
  cancel: () => done(cancel(env)),
  webhooks: ({ args: [what, webhookId], forwardTo, events: wanted, secret }) => {
    if (what === 'listen' && forwardTo)
      return done(
        webhooks.listen(env, {
          forwardTo,
          ...(wanted ? { events: wanted.split(',').filter(Boolean) } : {}),
          ...(secret ? { secret } : {}),
        }),
      );
    if (what === 'test' && webhookId) return webhooks.test(env, webhookId);
    if (what === 'list') return done(webhooks.list(env));
  },
  call: ({ args: [method, path, json] }) => (method && path ? call(env, method, path, json) : undefined),
};

async function main(argv: string[]): Promise<number> {
  const line = parseCommandLine(argv);
  if (line.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const run = line.command !== undefined && Object.hasOwn(COMMANDS, line.command) ? COMMANDS[line.command] : undefined;
  const ran = run?.(line);
  if (ran) return ran;
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error & { code?: string; status?: number }) => {
    // An API refusal says its code too (AgenthostError), so a script can tell one from another.
    process.stderr.write(`error: ${err.message}${err.name === 'AgenthostError' ? ` (${err.status} ${err.code})` : ''}\n`);
    process.exit(1);
  },
);
