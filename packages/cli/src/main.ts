#!/usr/bin/env node
import { airdrop, call, cancel, deposit, login, subscribe, walletCreate, walletShow, type Env } from './commands.ts';
import { isTierName } from '@agenthost/subscription-program';
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

/** Splits flags (--wait, -f, --name N, --tail N, --version V) from the positional arguments. */
function parse(argv: string[]): { args: string[]; flags: Record<string, string | true> } {
  const args: string[] = [];
  const flags: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-f' || a === '--follow') flags.follow = true;
    else if (a === '--wait') flags.wait = true;
    else if (['--name', '--version', '--tail', '--forward-to', '--events', '--secret'].includes(a) && argv[i + 1] !== undefined) flags[a.slice(2)] = argv[++i]!;
    else args.push(a);
  }
  return { args, flags };
}

/** Asked for: `help`, or `--help` / `-h` after any command, prints the commands on stdout, and that is a success. */
const asksHelp = (argv: string[]) => argv[0] === 'help' || argv.some((a) => a === '--help' || a === '-h');

async function main(argv: string[]): Promise<number> {
  if (asksHelp(argv)) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const { args, flags } = parse(argv);
  const [cmd, a, b, c] = argv;
  const id = args[1];
  const wait = flags.wait === true;
  const str = (v: string | true | undefined) => (typeof v === 'string' ? v : undefined);
  switch (cmd) {
    case 'create':
      return create(env, {
        ...(str(flags.name) ? { name: str(flags.name)! } : {}),
        ...(str(flags.version) ? { version: str(flags.version)! } : {}),
        wait,
      }).then(() => 0);
    case 'list':
      return list(env).then(() => 0);
    case 'status':
      if (id) return status(env, id).then(() => 0);
      break;
    case 'stop':
    case 'start':
    case 'restart':
    case 'delete':
      if (id) return verb(env, cmd, id, wait).then(() => 0);
      break;
    case 'logs':
      if (id) return logs(env, id, { follow: flags.follow === true, ...(str(flags.tail) ? { tail: Number(flags.tail) } : {}) }).then(() => 0);
      break;
    case 'events':
      if (id) return events(env, id).then(() => 0);
      break;
    case 'devices':
      if (id && !b) return devices(env, id).then(() => 0);
      if (id && (b === 'approve' || b === 'reject') && c) return devices(env, id, b, c).then(() => 0);
      break;
    case 'wallet':
      if (a === 'create') return walletCreate(env).then(() => 0);
      if (a === 'show') return walletShow(env).then(() => 0);
      break;
    case 'airdrop':
      if (a && Number(a) > 0) return airdrop(env, Number(a)).then(() => 0);
      break;
    case 'login':
      return login(env).then(() => 0);
    case 'subscribe':
      if (a && isTierName(a)) return subscribe(env, a).then(() => 0);
      break;
    case 'deposit':
      if (a && Number(a) > 0) return deposit(env, Number(a)).then(() => 0);
      break;
    case 'cancel':
      return cancel(env).then(() => 0);
    case 'webhooks':
      if (a === 'listen' && str(flags['forward-to']))
        return webhooks
          .listen(env, {
            forwardTo: str(flags['forward-to'])!,
            ...(str(flags.events) ? { events: str(flags.events)!.split(',').filter(Boolean) } : {}),
            ...(str(flags.secret) ? { secret: str(flags.secret)! } : {}),
          })
          .then(() => 0);
      if (a === 'test' && args[2]) return webhooks.test(env, args[2]);
      if (a === 'list') return webhooks.list(env).then(() => 0);
      break;
    case 'call':
      if (a && b) return call(env, a, b, c);
      break;
  }
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
