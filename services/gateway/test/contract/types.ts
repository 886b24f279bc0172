import type { ApiClient, Session } from '@agenthost/testkit';

// The contract test's case types, apart from the case lists (cases.ts, instance-cases.ts, webhook-cases.ts) that use them.

/** Ids the live cases learn as they go (the instance created, its backup, the clone), read by the cases after. */
export interface State {
  instance: string;
  backup: string;
  clone: string;
  /** Instance credentials issued for the instance (what its bootstrap would hold). */
  secret: string;
  /** A delivery in the webhook endpoint's log. */
  delivery: string;
}

/** A value, or one computed from what the cases before it learned. */
export type Live<T> = T | ((s: State) => T);

/** One live request of the contract test: an operation, who sends it, what, and the status it must get. */
export interface Case {
  operationId: string;
  /** What the case shows, for the failure message. */
  why: string;
  as: 'anyone' | 'user' | 'subscriber';
  /** Path parameters and query string filled in. */
  path: Live<string>;
  body?: Live<Record<string, unknown>>;
  headers?: Live<Record<string, string>>;
  status: number;
  /**
   * The request is one the document describes (a client generated from it would send it): its body is checked
   * against the documented schema, and it must never be refused with VALIDATION_FAILED.
   */
  documented?: true;
  /** Headers the answer must carry, by lower-case name, with their values. */
  answerHeaders?: Record<string, string>;
  /** The error code the answer must carry. */
  answerCode?: string;
  /** Runs after the answer: keeps an id for the cases after it. */
  keep?: (body: any, s: State) => void | Promise<void>;
}

export interface Actors {
  /** Signed in, no subscription. */
  user: Session;
  /** Signed in; its subscribe transaction is confirmed, and registered by the first case. */
  subscriber: Session;
  tx_signature: string;
  anyone: ApiClient;
  /** A statement on the stack's database, as its administrator. */
  sql(text: string, params: unknown[]): Promise<void>;
  /** Instance credentials from keyvault, as the provisioner gets them for a start. */
  issue(userId: string, instanceId: string): Promise<string>;
}

/** An instance id no one has: the error answers of instance-scoped operations. */
export const UNKNOWN_INSTANCE = 'contract-agent';
