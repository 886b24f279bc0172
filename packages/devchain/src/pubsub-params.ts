/** The *Subscribe / *Unsubscribe methods of one WebSocket connection: parameter checks and the subscription records they make. */
import type { WebSocket } from 'ws';
import { parseAccountEncoding } from './account-json.ts';
import type { AccountEncoding } from './account-json.ts';
import type { Account } from './accounts.ts';
import type { Chain } from './chain.ts';
import type { Commitment } from './clock.ts';
import { parsePubkey, parseSignature } from './encoding.ts';
import { invalidParams } from './errors.ts';
import { parseFilters } from './filters.ts';
import { stringifyJson } from './json.ts';
import type { AccountFilter } from './filters.ts';
import type { Methods, Params } from './rpc.ts';

type SignatureSub = { kind: 'signature'; ws: WebSocket; signature: string; commitment: Commitment; received: boolean };
export type AccountSub = { kind: 'account'; ws: WebSocket; key: string; commitment: Commitment; encoding: AccountEncoding; last: Account | null };
export type ProgramSub = {
  kind: 'program';
  ws: WebSocket;
  programId: string;
  commitment: Commitment;
  encoding: AccountEncoding;
  filters: AccountFilter[];
  /** The version of each of the program's accounts last looked at, so a change is notified once. */
  seen: Map<string, Account>;
  /** The first slot whose transactions this sub has not looked at yet. */
  nextSlot: number;
};
/** mentions: the one address a transaction must name, or null for every transaction. */
export type LogsSub = { kind: 'logs'; ws: WebSocket; mentions: string | null; commitment: Commitment; nextSlot: number };
type SlotSub = { kind: 'slot'; ws: WebSocket };
type RootSub = { kind: 'root'; ws: WebSocket };
type SlotsUpdatesSub = { kind: 'slotsUpdates'; ws: WebSocket };
export type Sub = SignatureSub | AccountSub | ProgramSub | LogsSub | SlotSub | RootSub | SlotsUpdatesSub;

export interface SubRegistry {
  add(s: Sub): number;
  /** false when the id is not a `kind` subscription of this connection */
  remove(id: number, kind: Sub['kind']): boolean;
}

const COMMITMENTS = new Set(['processed', 'confirmed', 'finalized']);

type Config = Record<string, unknown>;

function config(v: unknown): Config {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidParams('the configuration must be an object');
  return v as Config;
}

function commitmentOf(cfg: Config): Commitment {
  const c = cfg.commitment ?? 'finalized';
  if (typeof c !== 'string' || !COMMITMENTS.has(c)) throw invalidParams(`unknown commitment ${stringifyJson(c)}`);
  return c as Commitment;
}

function args(p: Params): unknown[] {
  if (!Array.isArray(p)) throw invalidParams('expected an array of parameters');
  return p;
}

/** logsSubscribe's filter: "all", "allWithVotes" (devchain has no votes) or { mentions: [one address] }. */
function logsFilter(v: unknown): string | null {
  if (v === 'all' || v === 'allWithVotes') return null;
  const mentions = (v as { mentions?: unknown } | null)?.mentions;
  if (typeof v !== 'object' || v === null || !Array.isArray(mentions)) throw invalidParams('filter must be "all", "allWithVotes" or { mentions: [address] }');
  if (mentions.length !== 1) throw invalidParams('Invalid Request: Only 1 address supported');
  return parsePubkey(mentions[0], 'mentions address');
}

export function subscribeMethods(chain: Chain, ws: WebSocket, registry: SubRegistry): Methods {
  const clock = chain.clock;
  const unsubscribe = (kind: Sub['kind']) => (p: Params) => {
    const id = args(p)[0];
    if (typeof id !== 'number' || !registry.remove(id, kind)) throw invalidParams('Invalid subscription id.');
    return true;
  };
  // With no encoding, account data comes in the legacy "binary" shape (a bare base58 string), as from agave.
  const accountEncoding = (cfg: Config): AccountEncoding => parseAccountEncoding(cfg.encoding, 'binary');
  return {
    signatureSubscribe: (p) => {
      const a = args(p);
      const signature = parseSignature(a[0]);
      const cfg = config(a[1]);
      return registry.add({ kind: 'signature', ws, signature, commitment: commitmentOf(cfg), received: cfg.enableReceivedNotification === true });
    },
    signatureUnsubscribe: unsubscribe('signature'),
    accountSubscribe: (p) => {
      const a = args(p);
      const key = parsePubkey(a[0]);
      const cfg = config(a[1]);
      const commitment = commitmentOf(cfg);
      const encoding = accountEncoding(cfg);
      const last = chain.accounts.get(key, clock.commitmentSlot(commitment));
      return registry.add({ kind: 'account', ws, key, commitment, encoding, last });
    },
    accountUnsubscribe: unsubscribe('account'),
    programSubscribe: (p) => {
      const a = args(p);
      const programId = parsePubkey(a[0], 'program id');
      const cfg = config(a[1]);
      const commitment = commitmentOf(cfg);
      const encoding = accountEncoding(cfg);
      const filters = parseFilters(cfg.filters);
      return registry.add({ kind: 'program', ws, programId, commitment, encoding, filters, seen: new Map(), nextSlot: clock.commitmentSlot(commitment) + 1 });
    },
    programUnsubscribe: unsubscribe('program'),
    logsSubscribe: (p) => {
      const a = args(p);
      const mentions = logsFilter(a[0]);
      const commitment = commitmentOf(config(a[1]));
      return registry.add({ kind: 'logs', ws, mentions, commitment, nextSlot: clock.commitmentSlot(commitment) + 1 });
    },
    logsUnsubscribe: unsubscribe('logs'),
    slotSubscribe: () => registry.add({ kind: 'slot', ws }),
    slotUnsubscribe: unsubscribe('slot'),
    rootSubscribe: () => registry.add({ kind: 'root', ws }),
    rootUnsubscribe: unsubscribe('root'),
    slotsUpdatesSubscribe: () => registry.add({ kind: 'slotsUpdates', ws }),
    slotsUpdatesUnsubscribe: unsubscribe('slotsUpdates'),
  };
}
