import { SOLANA_ERROR__JSON_RPC__INVALID_PARAMS, address, createSolanaRpc, createSolanaRpcSubscriptions_UNSTABLE, isSolanaError } from '@solana/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAUCET } from '../src/index.ts';
import { startTestChain } from './helpers.ts';
import type { TestChain } from './helpers.ts';
import { listen } from './kit.ts';

// Short epochs and fast slots, so an ended epoch exists for getInflationReward; samples each second.
let t: TestChain;
let rpc: ReturnType<typeof createSolanaRpc>;
let subscriptions: ReturnType<typeof createSolanaRpcSubscriptions_UNSTABLE>;
const identity = address(FAUCET.publicKey.toBase58());

beforeAll(async () => {
  t = await startTestChain({ slotMs: 10, slotsPerEpoch: 32, perfSampleSeconds: 1 });
  rpc = createSolanaRpc(t.chain.url);
  subscriptions = createSolanaRpcSubscriptions_UNSTABLE(t.chain.wsUrl);
});
afterAll(async () => {
  await t.close();
});

describe('validator methods through @solana/kit', () => {
  it('reads the cluster node, the leader schedule and block production of the one validator', async () => {
    const [node] = await rpc.getClusterNodes().send();
    expect(node?.pubkey).toBe(identity);
    expect(node?.rpc).toBe(`127.0.0.1:${t.chain.config.port}`);
    const schedule = await rpc.getLeaderSchedule().send();
    expect(schedule[identity]).toEqual(Array.from({ length: 32 }, (_, i) => BigInt(i)));
    const production = await rpc.getBlockProduction({ commitment: 'finalized' }).send();
    const { firstSlot, lastSlot } = production.value.range;
    expect(lastSlot).toBe(production.context.slot);
    const n = (lastSlot as bigint) - firstSlot + 1n;
    expect(production.value.byIdentity[identity]).toEqual([n, n]);
  });

  it('reads block commitment, stake minimum delegation and performance samples', async () => {
    const slot = await rpc.getSlot({ commitment: 'finalized' }).send();
    expect(await rpc.getBlockCommitment(slot).send()).toEqual({ commitment: null, totalStake: 0n });
    expect((await rpc.getStakeMinimumDelegation().send()).value).toBe(1_000_000_000n);
    await new Promise((r) => setTimeout(r, 1_300));
    const [sample] = await rpc.getRecentPerformanceSamples(1).send();
    expect(sample?.numSlots).toBeGreaterThan(0n);
    expect(sample?.slot).toBeLessThanOrEqual(await rpc.getSlot({ commitment: 'finalized' }).send());
  });

  it('reads inflation: the governor, the rate of the epoch and no reward for an unstaked address', async () => {
    expect(await rpc.getInflationGovernor().send()).toEqual({ initial: 0.08, terminal: 0.015, taper: 0.15, foundation: 0, foundationTerm: 0 });
    // The epoch of the rate is the chain's at the moment it is read: an epoch may end between two calls.
    const epoch = async () => (await rpc.getEpochInfo({ commitment: 'finalized' }).send()).epoch;
    const before = await epoch();
    const rate = await rpc.getInflationRate().send();
    const after = await epoch();
    expect(rate.total).toBeLessThanOrEqual(0.08);
    expect(rate.epoch >= before && rate.epoch <= after, `epoch ${rate.epoch}, chain ${before}..${after}`).toBe(true);
    // epoch 0's rewards are read from epoch 1's first block
    while ((await rpc.getEpochInfo({ commitment: 'confirmed' }).send()).epoch < 1n) await new Promise((r) => setTimeout(r, 50));
    expect(await rpc.getInflationReward([identity], { epoch: 0n, commitment: 'confirmed' }).send()).toEqual([null]);
    await expect(rpc.getInflationReward(['nope' as typeof identity]).send()).rejects.toSatisfy((e: unknown) =>
      isSolanaError(e, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS),
    );
  });
});

describe('root and slot update subscriptions through @solana/kit', () => {
  it('streams roots in order', async () => {
    const abort = new AbortController();
    const roots = listen(await subscriptions.rootNotifications().subscribe({ abortSignal: abort.signal }));
    await roots.first(() => roots.seen.length >= 3);
    const [a, b] = roots.seen;
    expect(b).toBe((a as bigint) + 1n);
    abort.abort();
  });

  it('streams createdBank, completed, frozen, optimisticConfirmation and root updates', async () => {
    const abort = new AbortController();
    const updates = listen(await subscriptions.slotsUpdatesNotifications().subscribe({ abortSignal: abort.signal }));
    const root = await updates.first((u) => u.type === 'root');
    const kinds = new Set(updates.seen.map((u) => u.type));
    for (const kind of ['createdBank', 'completed', 'frozen', 'optimisticConfirmation']) expect(kinds).toContain(kind);
    expect(typeof root.timestamp).toBe('bigint');
    abort.abort();
  });
});
