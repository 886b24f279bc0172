import bs58 from 'bs58';
import { newWallet, type ApiClient, type Session } from '@agenthost/testkit';
import { instanceCases } from './instance-cases.ts';

/** One live request of the contract test: an operation, who sends it, what, and the status it must get. */
/** Ids the live cases learn as they go (the instance created, its backup, the clone), read by the cases after. */
export interface State {
  instance: string;
  backup: string;
  clone: string;
  /** Instance credentials issued for the instance (what its bootstrap would hold). */
  secret: string;
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
  /** Runs after the answer: keeps an id for the cases after it. */
  then?: (body: any, s: State) => void | Promise<void>;
}

export interface Actors {
  /** Signed in, no subscription. */
  user: Session;
  /** Signed in; its subscribe transaction is confirmed, and registered by the first case. */
  subscriber: Session;
  tx_signature: string;
  anyone: ApiClient;
  /** Instance credentials from keyvault, as the provisioner gets them for a start. */
  issue(userId: string, instanceId: string): Promise<string>;
}

/** An instance id no one has: the error answers of instance-scoped operations. */
export const UNKNOWN_INSTANCE = 'contract-agent';

/**
 * Every operation with a documented request that is accepted, and the error answers a client meets most, in order:
 * auth and the subscription first, then an instance's whole life (instance-cases.ts), then logout.
 */
export async function cases(a: Actors): Promise<Case[]> {
  const wallet = newWallet();
  const nonce = (await a.anyone.get(`/auth/nonce?wallet_address=${wallet.address}`)).body;
  const login = { wallet_address: wallet.address, signature_base58: bs58.encode(wallet.sign(nonce.message)), nonce: nonce.nonce };
  // An endpoint made beforehand, so rotation, the delivery log and deletion are shown on one that exists.
  const hook = (await a.subscriber.api.post('/webhooks', { url: 'https://localhost/contract', events: ['instance.status'] })).body as { id: string };
  const MISSING_HOOK = 'wh_0123456789abcdef0123';
  return [
    { operationId: 'createWebhook', why: 'an allowed https host', as: 'user', path: '/webhooks', body: { url: 'https://localhost/hooks', events: ['instance.status', 'keys.changed'] }, status: 200, documented: true },
    { operationId: 'createWebhook', why: 'a loopback address', as: 'user', path: '/webhooks', body: { url: 'https://127.0.0.1/hooks', events: ['instance.status'] }, status: 400, documented: true },
    { operationId: 'createWebhook', why: 'an unknown event type', as: 'user', path: '/webhooks', body: { url: 'https://localhost/hooks', events: ['instance.nope'] }, status: 400 },
    { operationId: 'listWebhooks', why: 'the endpoints', as: 'subscriber', path: '/webhooks', status: 200, documented: true },
    { operationId: 'rotateWebhookSecret', why: 'a new secret', as: 'subscriber', path: `/webhooks/${hook.id}/rotate`, status: 200, documented: true },
    { operationId: 'listWebhookDeliveries', why: 'none yet', as: 'subscriber', path: `/webhooks/${hook.id}/deliveries?limit=10`, status: 200, documented: true },
    { operationId: 'listWebhookDeliveries', why: "another user's endpoint", as: 'user', path: `/webhooks/${hook.id}/deliveries`, status: 404, documented: true },
    { operationId: 'redeliverWebhook', why: 'an unknown delivery', as: 'subscriber', path: `/webhooks/${hook.id}/deliveries/msg_0123456789abcdef0123/redeliver`, status: 404, documented: true },
    { operationId: 'deleteWebhook', why: 'the endpoint', as: 'subscriber', path: `/webhooks/${hook.id}`, status: 200, documented: true },
    { operationId: 'deleteWebhook', why: 'gone', as: 'subscriber', path: `/webhooks/${MISSING_HOOK}`, status: 404, documented: true },
    { operationId: 'createNonce', why: 'a nonce for a wallet', as: 'anyone', path: `/auth/nonce?wallet_address=${newWallet().address}`, status: 200, documented: true },
    { operationId: 'createNonce', why: 'a malformed wallet', as: 'anyone', path: '/auth/nonce?wallet_address=0OIl', status: 400 },
    { operationId: 'login', why: 'our message signed', as: 'anyone', path: '/auth/login', body: login, status: 200, documented: true },
    { operationId: 'login', why: 'the nonce again', as: 'anyone', path: '/auth/login', body: login, status: 401, documented: true },
    { operationId: 'login', why: 'nothing to check', as: 'anyone', path: '/auth/login', body: {}, status: 400 },
    { operationId: 'whoAmI', why: 'the token', as: 'user', path: '/auth/me', status: 200, documented: true },
    { operationId: 'whoAmI', why: 'no token', as: 'anyone', path: '/auth/me', status: 401 },
    { operationId: 'registerSubscription', why: 'a confirmed subscribe', as: 'subscriber', path: '/subscription/register', body: { tx_signature: a.tx_signature, tier: 1 }, status: 200, documented: true },
    { operationId: 'registerSubscription', why: 'the same again (idempotent)', as: 'subscriber', path: '/subscription/register', body: { tx_signature: a.tx_signature, tier: 1 }, status: 200, documented: true },
    { operationId: 'registerSubscription', why: "another wallet's transaction", as: 'user', path: '/subscription/register', body: { tx_signature: a.tx_signature, tier: 1 }, status: 400, documented: true },
    { operationId: 'registerSubscription', why: 'no tier', as: 'user', path: '/subscription/register', body: { tx_signature: a.tx_signature }, status: 400 },
    { operationId: 'getSubscription', why: 'the subscription', as: 'subscriber', path: '/subscription/status', status: 200, documented: true },
    { operationId: 'getSubscription', why: 'none', as: 'user', path: '/subscription/status', status: 404, documented: true },
    { operationId: 'refreshSubscription', why: 'from the chain', as: 'subscriber', path: '/subscription/refresh', status: 200, documented: true },
    { operationId: 'getUsage', why: "today's usage", as: 'subscriber', path: '/usage/metrics', status: 200, documented: true },
    { operationId: 'getUsage', why: 'no subscription', as: 'user', path: '/usage/metrics', status: 402, documented: true },
    ...instanceCases(a),
    {
      operationId: 'reportKeysApplied',
      why: 'a report',
      as: 'anyone',
      path: '/keys/applied',
      body: { instance_id: UNKNOWN_INSTANCE, change_id: 'AAAAAAAAAAAAAAAAAAAAAA', applied: true },
      status: 200,
      documented: true,
    },
    // Last: the user's token stops working.
    { operationId: 'logout', why: 'the token', as: 'user', path: '/auth/logout', status: 200, documented: true },
    { operationId: 'logout', why: 'a revoked token', as: 'user', path: '/auth/logout', status: 401, documented: true },
  ];
}
