import type { SlotUpdate } from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestChain } from './helpers.ts';
import type { TestChain } from './helpers.ts';

let t: TestChain;
beforeAll(async () => {
  t = await startTestChain({ slotMs: 20 });
});
afterAll(async () => {
  await t.close();
});

/** A raw WebSocket client: subscribes and collects every notification of `method`. */
async function subscribe(method: string) {
  const ws = new WebSocket(t.chain.wsUrl);
  await new Promise((r) => ws.addEventListener('open', r, { once: true }));
  const notes: Array<{ method: string; params: { result: any; subscription: number } }> = [];
  const replies: any[] = [];
  ws.addEventListener('message', (m) => {
    const msg = JSON.parse(String(m.data));
    if ('id' in msg) replies.push(msg);
    else notes.push(msg);
  });
  const call = async (name: string, params: unknown[] = []) => {
    const id = replies.length + 1000;
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method: name, params }));
    for (let i = 0; i < 200 && !replies.some((r) => r.id === id); i++) await new Promise((r) => setTimeout(r, 10));
    return replies.find((r) => r.id === id);
  };
  const { result: id } = await call(method);
  return { id, notes, call, close: () => ws.close() };
}

const until = async (check: () => boolean, ms = 5_000) => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('rootSubscribe', () => {
  it('notifies each slot as devchain roots it, one after another, matching the finalized slot', async () => {
    const sub = await subscribe('rootSubscribe');
    expect(typeof sub.id).toBe('number');
    await until(() => sub.notes.length >= 5);
    const roots = sub.notes.map((n) => n.params.result as number);
    expect(sub.notes.every((n) => n.method === 'rootNotification' && n.params.subscription === sub.id)).toBe(true);
    roots.slice(1).forEach((r, i) => expect(r).toBe(roots[i]! + 1));
    const finalized = await t.conn.getSlot('finalized');
    expect(finalized).toBeGreaterThanOrEqual(roots[roots.length - 1]!);
    expect(await sub.call('rootUnsubscribe', [sub.id])).toMatchObject({ result: true });
    expect((await sub.call('rootUnsubscribe', [sub.id])).error).toEqual({ code: -32602, message: 'Invalid params: Invalid subscription id.' });
    sub.close();
  });

  it("reaches web3.js's onRootChange", async () => {
    const roots: number[] = [];
    const id = t.conn.onRootChange((root) => roots.push(root));
    await until(() => roots.length >= 2);
    expect(roots[1]).toBe(roots[0]! + 1);
    await t.conn.removeRootChangeListener(id);
  });
});

describe('slotsUpdatesSubscribe', () => {
  it("sends the kinds a leader's node sends for each slot, with the frozen slot's transactions counted", async () => {
    const sub = await subscribe('slotsUpdatesSubscribe');
    // The transaction lands in the slot open at the time: wait for a slot opened after the subscription, so the one it
    // lands in has its createdBank in the notes too.
    await until(() => sub.notes.some((n) => n.params.result.type === 'createdBank'));
    const payer = await t.funded(1);
    const landed = (await t.conn.getSignaturesForAddress(payer.publicKey, {}, 'confirmed'))[0]!.slot;
    await until(() => sub.notes.some((n) => n.params.result.type === 'root' && n.params.result.slot >= landed));
    const updates = sub.notes.map((n) => n.params.result);
    expect(new Set(updates.map((u) => u.type))).toEqual(new Set(['completed', 'frozen', 'createdBank', 'optimisticConfirmation', 'root']));
    const frozen = updates.find((u) => u.type === 'frozen' && u.slot === landed);
    expect(frozen.stats).toEqual({ numTransactionEntries: 1, numSuccessfulTransactions: 1, numFailedTransactions: 0, maxTransactionsPerEntry: 1 });
    const block = await t.conn.getBlock(landed, { maxSupportedTransactionVersion: 0 });
    expect(frozen.hash).toBe(block?.blockhash);
    const created = updates.find((u) => u.type === 'createdBank' && u.slot === landed);
    expect(created.parent).toBe(landed - 1);
    // one slot's events in the order its node raises them
    const kinds = updates.filter((u) => u.slot === landed).map((u) => u.type);
    expect(kinds).toEqual(['createdBank', 'completed', 'frozen', 'optimisticConfirmation', 'root']);
    for (const u of updates) expect(Math.abs(u.timestamp - Date.now())).toBeLessThan(60_000);
    expect(await sub.call('slotsUpdatesUnsubscribe', [sub.id])).toMatchObject({ result: true });
    sub.close();
  });

  it("reaches web3.js's onSlotUpdate, parsed as its SlotUpdate types", async () => {
    const seen: SlotUpdate[] = [];
    const id = t.conn.onSlotUpdate((u) => seen.push(u));
    await until(() => seen.some((u) => u.type === 'root') && seen.some((u) => u.type === 'frozen'));
    const frozen = seen.find((u) => u.type === 'frozen');
    expect(frozen?.type === 'frozen' && typeof frozen.stats.numSuccessfulTransactions).toBe('number');
    await t.conn.removeSlotUpdateListener(id);
  });
});
