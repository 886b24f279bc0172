import bs58 from 'bs58';
import { newWallet, type ApiClient, type Session } from '@agenthost/testkit';

/** One live request of the contract test: an operation, who sends it, what, and the status it must get. */
export interface Case {
  operationId: string;
  /** What the case shows, for the failure message. */
  why: string;
  as: 'anyone' | 'user' | 'subscriber';
  /** Path parameters and query string filled in. */
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  /**
   * The request is one the document describes (a client generated from it would send it): its body is checked
   * against the documented schema, and it must never be refused with VALIDATION_FAILED.
   */
  documented?: true;
}

export interface Actors {
  /** Signed in, no subscription. */
  user: Session;
  /** Signed in; its subscribe transaction is confirmed, and registered by the first case. */
  subscriber: Session;
  tx_signature: string;
  anyone: ApiClient;
}

const INSTANCE = 'contract-agent';
const BACKUP = 'bk-0123456789abcdef0123';

/**
 * Every operation with a documented request that is accepted, and the error answers a client meets most. Without a
 * provisioner in the stack (its instances need Docker; its own suites drive them), an accepted instance request is
 * answered 503 SERVICE_UNAVAILABLE: past the gateway's checks, which is what the contract is about.
 */
export async function cases(a: Actors): Promise<Case[]> {
  const wallet = newWallet();
  const nonce = (await a.anyone.get(`/auth/nonce?wallet_address=${wallet.address}`)).body;
  const login = { wallet_address: wallet.address, signature_base58: bs58.encode(wallet.sign(nonce.message)), nonce: nonce.nonce };
  const noProvisioner = 503;
  return [
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
    { operationId: 'createInstance', why: 'accepted', as: 'subscriber', path: '/instance/create', body: { framework: 'openclaw', name: 'contract agent' }, status: noProvisioner, documented: true },
    { operationId: 'createInstance', why: 'no framework', as: 'subscriber', path: '/instance/create', body: { name: 'x' }, status: 400 },
    { operationId: 'createInstance', why: 'no subscription', as: 'user', path: '/instance/create', body: { framework: 'openclaw' }, status: 402, documented: true },
    { operationId: 'listInstances', why: 'accepted', as: 'subscriber', path: '/instance/list', status: noProvisioner, documented: true },
    { operationId: 'getInstance', why: 'accepted', as: 'subscriber', path: `/instance/status/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'restartInstance', why: 'accepted', as: 'subscriber', path: `/instance/restart/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'stopInstance', why: 'accepted', as: 'subscriber', path: `/instance/stop/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'startInstance', why: 'accepted', as: 'subscriber', path: `/instance/start/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'upgradeInstance', why: 'accepted', as: 'subscriber', path: `/instance/upgrade/${INSTANCE}`, body: { version: '2026.9.6' }, status: noProvisioner, documented: true },
    { operationId: 'deleteInstance', why: 'accepted', as: 'subscriber', path: `/instance/delete/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'getInstanceLogs', why: 'accepted', as: 'subscriber', path: `/instance/logs/${INSTANCE}?tail=50`, status: noProvisioner, documented: true },
    { operationId: 'waitForInstance', why: 'accepted', as: 'subscriber', path: `/instance/wait/${INSTANCE}?state=running&timeout=1`, status: noProvisioner, documented: true },
    { operationId: 'waitForInstance', why: 'an unknown state', as: 'subscriber', path: `/instance/wait/${INSTANCE}?state=asleep`, status: 400 },
    { operationId: 'streamInstanceEvents', why: 'accepted', as: 'subscriber', path: `/instance/events/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'createBackup', why: 'accepted', as: 'subscriber', path: `/instance/backup/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'listBackups', why: 'accepted', as: 'subscriber', path: `/instance/backups/${INSTANCE}`, status: noProvisioner, documented: true },
    { operationId: 'restoreBackup', why: 'accepted', as: 'subscriber', path: `/instance/restore/${INSTANCE}`, body: { backup_id: BACKUP }, status: noProvisioner, documented: true },
    { operationId: 'cloneInstance', why: 'accepted', as: 'subscriber', path: `/instance/clone/${INSTANCE}`, body: { backup_id: BACKUP, name: 'clone' }, status: noProvisioner, documented: true },
    { operationId: 'deleteBackup', why: 'accepted', as: 'subscriber', path: `/instance/backup/${INSTANCE}/${BACKUP}`, status: noProvisioner, documented: true },
    // keyvault knows no instance of this user's: each documented request passes the gateway and is refused there.
    { operationId: 'storeKeys', why: 'not my instance', as: 'subscriber', path: '/keys/store', body: { instance_id: INSTANCE, keys: { OPENAI_API_KEY: 'sk-test' } }, status: 404, documented: true },
    { operationId: 'storeKeys', why: 'a reserved name', as: 'subscriber', path: '/keys/store', body: { instance_id: INSTANCE, keys: { AGENTHOST_X: 'v' } }, status: 400 },
    { operationId: 'updateKey', why: 'not my instance', as: 'subscriber', path: '/keys/update', body: { instance_id: INSTANCE, key_name: 'OPENAI_API_KEY', key_value: 'sk-2' }, status: 404, documented: true },
    { operationId: 'deleteKeys', why: 'not my instance', as: 'subscriber', path: '/keys/delete', body: { instance_id: INSTANCE, key_names: ['OPENAI_API_KEY'] }, status: 404, documented: true },
    { operationId: 'listKeys', why: 'not my instance', as: 'subscriber', path: `/keys/list?instance_id=${INSTANCE}`, status: 404, documented: true },
    { operationId: 'listKeyAudit', why: 'not my instance', as: 'subscriber', path: `/keys/audit?instance_id=${INSTANCE}&limit=10`, status: 404, documented: true },
    { operationId: 'retrieveKeys', why: 'unknown instance', as: 'anyone', path: '/keys/retrieve', headers: { 'X-Instance-ID': INSTANCE, 'X-Instance-Secret': 'nope' }, status: 401, documented: true },
    { operationId: 'watchKeys', why: 'unknown instance', as: 'anyone', path: '/keys/watch', headers: { 'X-Instance-ID': INSTANCE, 'X-Instance-Secret': 'nope' }, status: 401, documented: true },
    {
      operationId: 'reportKeysApplied',
      why: 'a report',
      as: 'anyone',
      path: '/keys/applied',
      body: { instance_id: INSTANCE, change_id: 'AAAAAAAAAAAAAAAAAAAAAA', applied: true },
      status: 200,
      documented: true,
    },
    // Last: the user's token stops working.
    { operationId: 'logout', why: 'the token', as: 'user', path: '/auth/logout', status: 200, documented: true },
    { operationId: 'logout', why: 'a revoked token', as: 'user', path: '/auth/logout', status: 401, documented: true },
  ];
}
