/**
 * Solana PubSub over WebSocket: signature, account, program, logs, slot, root and slotsUpdates
 * subscriptions and their unsubscribes — what @solana/web3.js v1 and @solana/kit's
 * rpc-subscriptions use.
 * Notifications at `processed` go out as each transaction lands; at `confirmed`/`finalized`
 * when the slot holding it reaches that commitment, as on a real node.
 */
import type { WebSocket } from 'ws';
import { accountJson, closedAccountJson } from './account-json.ts';
import type { Chain } from './chain.ts';
import type { TransactionRecord } from './ledger.ts';
import { matchesAll } from './filters.ts';
import { stringifyJson } from './json.ts';
import { rpcContext } from './methods/params.ts';
import { subscribeMethods } from './pubsub-params.ts';
import { handleBody } from './rpc.ts';
import type { Methods } from './rpc.ts';
import { slotUpdates } from './slot-updates.ts';
import { isWritable } from './transaction.ts';
import type { AccountSub, LogsSub, ProgramSub, Sub } from './pubsub-params.ts';

function send(ws: WebSocket, method: string, subscription: number, result: unknown): void {
  if (ws.readyState === ws.OPEN) ws.send(stringifyJson({ jsonrpc: '2.0', method, params: { result, subscription } }));
}

const writableKeys = (r: TransactionRecord): string[] => r.tx.accountKeys.filter((_k, i) => isWritable(r.tx, i));

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
    return subscribeMethods(this.chain, ws, {
      add: (s) => {
        const id = this.nextId++;
        this.subs.set(id, s);
        // A signature that already reached the commitment is notified right after the reply.
        if (s.kind === 'signature') setImmediate(() => this.checkSignature(id));
        return id;
      },
      remove: (id, kind) => {
        const s = this.subs.get(id);
        if (!s || s.kind !== kind || s.ws !== ws) return false;
        this.subs.delete(id);
        return true;
      },
    });
  }

  private checkSignature(id: number): void {
    const s = this.subs.get(id);
    if (s?.kind !== 'signature') return;
    const r = this.chain.ledger.get(s.signature);
    if (!r || this.chain.clock.commitmentSlot(s.commitment) < r.slot) return;
    this.subs.delete(id);
    send(s.ws, 'signatureNotification', id, { context: rpcContext(r.slot), value: { err: r.err } });
  }

  private checkAccount(id: number, s: AccountSub): void {
    const slot = this.chain.clock.commitmentSlot(s.commitment);
    const now = this.chain.accounts.get(s.key, slot);
    if (now === s.last) return;
    s.last = now;
    const value = now === null ? closedAccountJson(s.encoding) : accountJson(now, s.encoding);
    send(s.ws, 'accountNotification', id, { context: rpcContext(slot), value });
  }

  /** Notifies the program's accounts among `keys` whose state at the sub's commitment changed. */
  private checkProgram(id: number, s: ProgramSub, keys: Iterable<string>): void {
    const slot = this.chain.clock.commitmentSlot(s.commitment);
    for (const key of keys) {
      const account = this.chain.accounts.get(key, slot);
      if (account === null || account.owner !== s.programId || s.seen.get(key) === account) continue;
      s.seen.set(key, account);
      if (!matchesAll(account, s.filters)) continue;
      send(s.ws, 'programNotification', id, { context: rpcContext(slot), value: { account: accountJson(account, s.encoding), pubkey: key } });
    }
  }

  private checkLogs(id: number, s: LogsSub, r: TransactionRecord): void {
    if (s.mentions !== null && !r.tx.accountKeys.includes(s.mentions)) return;
    send(s.ws, 'logsNotification', id, { context: rpcContext(r.slot), value: { err: r.err, logs: r.logs, signature: r.signature } });
  }

  /** The transactions that reached the sub's commitment since it last looked. */
  private newlyCommitted(s: ProgramSub | LogsSub): TransactionRecord[] {
    const upTo = this.chain.clock.commitmentSlot(s.commitment);
    const out: TransactionRecord[] = [];
    for (; s.nextSlot <= upTo; s.nextSlot++) out.push(...this.chain.ledger.inSlot(s.nextSlot));
    return out;
  }

  private onTransaction(r: TransactionRecord): void {
    for (const [id, s] of this.subs) {
      if (s.kind === 'signature' && s.signature === r.signature) {
        if (s.received) {
          s.received = false;
          send(s.ws, 'signatureNotification', id, { context: rpcContext(r.slot), value: 'receivedSignature' });
        }
        this.checkSignature(id);
      } else if (s.kind === 'account' && s.commitment === 'processed') this.checkAccount(id, s);
      else if (s.kind === 'program' && s.commitment === 'processed') this.checkProgram(id, s, writableKeys(r));
      else if (s.kind === 'logs' && s.commitment === 'processed') this.checkLogs(id, s, r);
    }
  }

  private onSlot(slot: number): void {
    const root = this.chain.clock.commitmentSlot('finalized');
    let updates: object[] | undefined;
    for (const [id, s] of this.subs) {
      if (s.kind === 'signature') this.checkSignature(id);
      else if (s.kind === 'account') this.checkAccount(id, s);
      else if (s.kind === 'program' && s.commitment !== 'processed') this.checkProgram(id, s, new Set(this.newlyCommitted(s).flatMap(writableKeys)));
      else if (s.kind === 'logs' && s.commitment !== 'processed') this.newlyCommitted(s).forEach((r) => this.checkLogs(id, s, r));
      else if (s.kind === 'slot') send(s.ws, 'slotNotification', id, { parent: slot - 1, root, slot });
      // Each tick roots exactly one slot (the finalized slot moves with the current one).
      else if (s.kind === 'root') send(s.ws, 'rootNotification', id, root);
      else if (s.kind === 'slotsUpdates') for (const u of (updates ??= slotUpdates(this.chain, slot))) send(s.ws, 'slotsUpdatesNotification', id, u);
    }
  }

  get size(): number {
    return this.subs.size;
  }
}
