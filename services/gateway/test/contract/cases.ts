import bs58 from 'bs58';
import { newWallet } from '@agenthost/testkit';
import { idempotencyCases } from './idempotency-cases.ts';
import { instanceCases } from './instance-cases.ts';
import { type Actors, type Case, UNKNOWN_INSTANCE } from './types.ts';
import { webhookCases } from './webhook-cases.ts';

/**
 * Every operation with a documented request that is accepted, and the error answers a client meets most, in order:
 * auth and the subscription first, then an instance's whole life (instance-cases.ts), then logout.
 */
export async function cases(a: Actors): Promise<Case[]> {
  const wallet = newWallet();
  const nonce = (await a.anyone.get(`/auth/nonce?wallet_address=${wallet.address}`)).body;
  const login = { wallet_address: wallet.address, signature_base58: bs58.encode(wallet.sign(nonce.message)), nonce: nonce.nonce };
  const hooks = await webhookCases(a);
  return [
    ...hooks.before,
    {
      operationId: 'createNonce',
      why: 'a nonce for a wallet',
      as: 'anyone',
      path: `/auth/nonce?wallet_address=${newWallet().address}`,
      status: 200,
      documented: true,
    },
    { operationId: 'createNonce', why: 'a malformed wallet', as: 'anyone', path: '/auth/nonce?wallet_address=0OIl', status: 400 },
    { operationId: 'login', why: 'our message signed', as: 'anyone', path: '/auth/login', body: login, status: 200, documented: true },
    { operationId: 'login', why: 'the nonce again', as: 'anyone', path: '/auth/login', body: login, status: 401, documented: true },
    { operationId: 'login', why: 'nothing to check', as: 'anyone', path: '/auth/login', body: {}, status: 400 },
    { operationId: 'whoAmI', why: 'the token', as: 'user', path: '/auth/me', status: 200, documented: true },
    { operationId: 'whoAmI', why: 'no token', as: 'anyone', path: '/auth/me', status: 401 },
    {
      operationId: 'registerSubscription',
      why: 'a confirmed subscribe',
      as: 'subscriber',
      path: '/subscription/register',
      body: { tx_signature: a.tx_signature, tier: 1 },
      status: 200,
      documented: true,
    },
    {
      operationId: 'registerSubscription',
      why: 'the same again (idempotent)',
      as: 'subscriber',
      path: '/subscription/register',
      body: { tx_signature: a.tx_signature, tier: 1 },
      status: 200,
      documented: true,
    },
    {
      operationId: 'registerSubscription',
      why: "another wallet's transaction",
      as: 'user',
      path: '/subscription/register',
      body: { tx_signature: a.tx_signature, tier: 1 },
      status: 400,
      documented: true,
    },
    { operationId: 'registerSubscription', why: 'no tier', as: 'user', path: '/subscription/register', body: { tx_signature: a.tx_signature }, status: 400 },
    { operationId: 'getSubscription', why: 'the subscription', as: 'subscriber', path: '/subscription/status', status: 200, documented: true },
    { operationId: 'getSubscription', why: 'none', as: 'user', path: '/subscription/status', status: 404, documented: true },
    { operationId: 'refreshSubscription', why: 'from the chain', as: 'subscriber', path: '/subscription/refresh', status: 200, documented: true },
    { operationId: 'getUsage', why: "today's usage", as: 'subscriber', path: '/usage/metrics', status: 200, documented: true },
    { operationId: 'getUsage', why: 'no subscription', as: 'user', path: '/usage/metrics', status: 402, documented: true },
    ...idempotencyCases(a),
    ...instanceCases(a),
    ...hooks.after,
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
