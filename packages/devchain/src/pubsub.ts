/**
 * Solana PubSub over WebSocket: signatureSubscribe, accountSubscribe, slotSubscribe and
 * their unsubscribes — what @solana/web3.js v1 uses for confirmTransaction and onAccountChange.
 */
import type { WebSocket } from 'ws';
import { SYSTEM_PROGRAM_ID } from './accounts.ts';
import type { Account } from './accounts.ts';
import type { Chain } from './chain.ts';
import type { Commitment } from './clock.ts';
import { parsePubkey, parseSignature } from './encoding.ts';
import { invalidParams } from './errors.ts';
import { accountJson, parseAccountEncoding } from './format.ts';
import type { AccountEncoding } from './format.ts';
import type { TransactionRecord } from './ledger.ts';
import { SOLANA_CORE_VERSION } from './methods.ts';
import { handleBody } from './rpc.ts';
import type { Methods, Params } from './rpc.ts';

type Sub =
  | { kind: 'signature'; ws: WebSocket; signature: string; commitment: Commitment; received: boolean }
  | { kind: 'account'; ws: WebSocket; key: string; commitment: Commitment; encoding: AccountEncoding; last: Account | null }
  | { kind: 'slot'; ws: WebSocket };

const COMMITMENTS = new Set(['processed', 'confirmed', 'finalized']);

function commitmentOf(cfg: unknown): Commitment {
  const c = (cfg as { commitment?: unknown } | undefined)?.commitment ?? 'finalized';
  if (typeof c !== 'string' || !COMMITMENTS.has(c)) throw invalidParams(`unknown commitment ${JSON.stringify(c)}`);
  return c as Commitment;
}

function send(ws: WebSocket, method: string, subscription: number, result: unknown): void {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ jsonrpc: '2.0', method, params: { result, subscription } }));
}

export class PubSub {
  private readonly chain: Chain;
  private readonly subs = new Map<number, Sub>();
  private nextId = 0;

  constructor(chain: Chain) {
    this.chain = chain;
    chain.onTransaction((r) => this.onTransaction(r));
    chain.clock.onSlot((slot) => this.onSlot(slot));
  }

  handleConnection(ws: WebSocket): void {
    const methods = this.methodsFor(ws);
    ws.on('message', (data, isBinary) => {
      const reply = handleBody(isBinary ? '' : data.toString(), methods);
      if (reply !== null && ws.readyState === ws.OPEN) ws.send(reply);
    });
    ws.on('close', () => {
      for (const [id, s] of this.subs) if (s.ws === ws) this.subs.delete(id);
    });
    ws.on('error', () => ws.terminate());
  }

  private methodsFor(ws: WebSocket): Methods {
    const args = (p: Params): unknown[] => {
      if (!Array.isArray(p)) throw invalidParams('expected an array of parameters');
      return p;
    };
    const unsubscribe = (kind: Sub['kind']) => (p: Params) => {
      const id = args(p)[0];
      const s = typeof id === 'number' ? this.subs.get(id) : undefined;
      if (!s || s.kind !== kind || s.ws !== ws) throw invalidParams('Invalid subscription id.');
      this.subs.delete(id as number);
      return true;
    };
    return {
      signatureSubscribe: (p) => {
        const a = args(p);
        const signature = parseSignature(a[0]);
        const cfg = a[1] as { enableReceivedNotification?: unknown } | undefined;
        const id = this.add({ kind: 'signature', ws, signature, commitment: commitmentOf(cfg), received: cfg?.enableReceivedNotification === true });
        // A signature that already reached the commitment is notified right after the reply.
        setImmediate(() => this.checkSignature(id));
        return id;
      },
      signatureUnsubscribe: unsubscribe('signature'),
      accountSubscribe: (p) => {
        const a = args(p);
        const key = parsePubkey(a[0]);
        const commitment = commitmentOf(a[1]);
        const encoding = parseAccountEncoding((a[1] as { encoding?: unknown } | undefined)?.encoding, 'base58');
        const last = this.chain.accounts.get(key, this.chain.clock.commitmentSlot(commitment));
        return this.add({ kind: 'account', ws, key, commitment, encoding, last });
      },
      accountUnsubscribe: unsubscribe('account'),
      slotSubscribe: () => this.add({ kind: 'slot', ws }),
      slotUnsubscribe: unsubscribe('slot'),
    };
  }

  private add(s: Sub): number {
    const id = this.nextId++;
    this.subs.set(id, s);
    return id;
  }

  private checkSignature(id: number): void {
    const s = this.subs.get(id);
    if (!s || s.kind !== 'signature') return;
    const r = this.chain.ledger.get(s.signature);
    if (!r || this.chain.clock.commitmentSlot(s.commitment) < r.slot) return;
    this.subs.delete(id);
    send(s.ws, 'signatureNotification', id, { context: { apiVersion: SOLANA_CORE_VERSION, slot: r.slot }, value: { err: r.err } });
  }

  private checkAccount(id: number, s: Extract<Sub, { kind: 'account' }>): void {
    const slot = this.chain.clock.commitmentSlot(s.commitment);
    const now = this.chain.accounts.get(s.key, slot);
    if (now === s.last) return;
    s.last = now;
    const value = accountJson(now, s.encoding) ?? accountJson({ lamports: 1n, data: new Uint8Array(), owner: SYSTEM_PROGRAM_ID, executable: false }, s.encoding);
    if (now === null && value) value.lamports = 0;
    send(s.ws, 'accountNotification', id, { context: { apiVersion: SOLANA_CORE_VERSION, slot }, value });
  }

  private onTransaction(r: TransactionRecord): void {
    for (const [id, s] of this.subs) {
      if (s.kind === 'signature' && s.signature === r.signature) {
        if (s.received) {
          s.received = false;
          send(s.ws, 'signatureNotification', id, { context: { apiVersion: SOLANA_CORE_VERSION, slot: r.slot }, value: 'receivedSignature' });
        }
        this.checkSignature(id);
      } else if (s.kind === 'account' && s.commitment === 'processed') this.checkAccount(id, s);
    }
  }

  private onSlot(slot: number): void {
    const root = this.chain.clock.commitmentSlot('finalized');
    for (const [id, s] of this.subs) {
      if (s.kind === 'signature') this.checkSignature(id);
      else if (s.kind === 'account') this.checkAccount(id, s);
      else send(s.ws, 'slotNotification', id, { parent: slot - 1, root, slot });
    }
  }

  get size(): number {
    return this.subs.size;
  }
}
