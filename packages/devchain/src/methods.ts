/**
 * The JSON-RPC method table: Solana methods (by job in ./methods/) and the devchain_* dev
 * methods. packages/devchain/README.md lists what is served and what is left out.
 */
import { PERIOD_SECONDS } from '@agenthost/subscription-program';
import type { Chain } from './chain.ts';
import { FAUCET } from './chain.ts';
import { invalidParams } from './errors.ts';
import { accountMethods } from './methods/accounts.ts';
import { blockMethods } from './methods/blocks.ts';
import { clusterMethods } from './methods/cluster.ts';
import { inflationMethods } from './methods/inflation.ts';
import { tokenMethods } from './methods/tokens.ts';
import { transactionMethods } from './methods/transactions.ts';
import { validatorMethods } from './methods/validators.ts';
import type { Methods } from './rpc.ts';
import { LAMPORTS_PER_SIGNATURE } from './runtime.ts';

function devMethods(chain: Chain): Methods {
  const clock = chain.clock;
  return {
    devchain_advanceClock: (p) => {
      const seconds = Array.isArray(p) ? p[0] : p.seconds;
      if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) throw invalidParams('seconds must be a number >= 0');
      return clock.advance(seconds);
    },
    devchain_getClock: () => ({ unixTimestamp: clock.now(), offsetSeconds: clock.offset, slot: clock.slot }),
    devchain_getConfig: () => devchainInfo(chain),
  };
}

export function createMethods(chain: Chain): Methods {
  return {
    ...clusterMethods(chain),
    ...blockMethods(chain),
    ...accountMethods(chain),
    ...transactionMethods(chain),
    ...tokenMethods(chain),
    ...validatorMethods(chain),
    ...inflationMethods(chain),
    ...(chain.config.devMethods ? devMethods(chain) : {}),
  };
}

function devchainInfo(chain: Chain) {
  const c = chain.config;
  return {
    programId: c.programId,
    treasury: c.treasury,
    prices: { ...c.prices },
    periodSeconds: PERIOD_SECONDS,
    slotMs: c.slotMs,
    finalizeSlots: c.finalizeSlots,
    lamportsPerSignature: Number(LAMPORTS_PER_SIGNATURE),
    faucet: FAUCET.publicKey.toBase58(),
  };
}
