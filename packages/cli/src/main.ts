#!/usr/bin/env node
import { airdrop, call, cancel, deposit, login, subscribe, walletCreate, walletShow, type Env } from './commands.ts';
import { isTierName } from '@agenthost/subscription-program';

const USAGE = `agenthost — command line for the agenthost API

  agenthost wallet create            make a wallet (~/.agenthost/wallet.json)
  agenthost wallet show              print its address
  agenthost airdrop <SOL>            devchain only: fund the wallet
  agenthost login                    sign in with the wallet (Sign-In With Solana)
  agenthost subscribe <tier>         free | pro | enterprise: send the transaction and register it
  agenthost deposit <SOL>            prepay renewals into the subscription account
  agenthost cancel                   cancel (access continues until expiry)
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

async function main(argv: string[]): Promise<number> {
  const [cmd, a, b, c] = argv;
  switch (cmd) {
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
    case 'call':
      if (a && b) return call(env, a, b, c);
      break;
  }
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`error: ${err.message}\n`);
    process.exit(1);
  },
);
