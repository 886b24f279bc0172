import { ApiError } from './api.ts';

/** The API's error codes in plain words: what happened and what the user can do about it. */
const PLAIN: Record<string, string> = {
  INVALID_SIGNATURE: 'The signature did not match the sign-in message. Try signing in again.',
  NONCE_INVALID: 'The sign-in request expired or was already used. Try signing in again.',
  UNAUTHORIZED: 'Your session has expired or was ended. Sign in again to continue where you were.',
  SUBSCRIPTION_REQUIRED: 'This needs an active subscription. Choose a plan on the Subscription page.',
  SUBSCRIPTION_NOT_FOUND: 'This wallet has no subscription yet.',
  SUBSCRIPTION_CANCELLED: 'Your subscription is cancelled: your instances keep running until it expires, but no new ones can be created. Renew to create more.',
  DAILY_LIMIT_EXCEEDED: "You have used all of today's requests for your plan. They reset at 00:00 UTC, or you can upgrade your plan.",
  INSTANCE_LIMIT_EXCEEDED: "Your plan's instance limit is reached. Delete an instance or upgrade your plan to create another.",
  STORAGE_LIMIT_EXCEEDED: "Your plan's storage is full. Delete an instance or upgrade your plan.",
  KEY_LIMIT_EXCEEDED: 'This instance already holds as many keys as allowed. Delete one first.',
  KEY_NOT_FOUND: 'That key does not exist (any more). The list has been refreshed.',
  INSTANCE_NOT_FOUND: 'That instance does not exist (any more).',
  INSTANCE_STATE_CONFLICT: 'The instance cannot do that in its current state. Wait until it is running or stopped.',
  INSTANCE_CREDENTIALS_STALE: 'This instance needs a restart to pick up new credentials.',
  PORTS_EXHAUSTED: 'The service has no free port for a new instance right now. Try again later.',
  RATE_LIMITED: 'Too many requests in a short time. Wait a moment and try again.',
  TRANSACTION_NOT_FOUND: 'The transaction is not confirmed on chain yet. Try again in a few seconds.',
  TX_FAILED: 'The transaction failed on chain, so nothing was paid.',
  TX_ALREADY_USED: 'That transaction was already used for another wallet.',
  TX_WRONG_SIGNER: 'The transaction was signed by a different wallet from the one you are signed in with.',
  TX_TIER_MISMATCH: 'The transaction is for a different plan from the one chosen.',
  CHAIN_UNAVAILABLE: 'The blockchain cannot be reached right now. Try again shortly.',
  DOCKER_UNAVAILABLE: 'Instances cannot be managed right now (the container engine is unavailable). Try again shortly.',
  SERVICE_UNAVAILABLE: 'The service is briefly unavailable. Try again shortly.',
  VALIDATION_FAILED: 'Some of what you entered is not valid',
  INTERNAL: 'Something went wrong on our side. Try again; if it keeps happening, contact the operator.',
};

/** A sentence for any failure: the API's code when there is one, else the error's own message. */
export function plain(err: unknown): string {
  if (err instanceof ApiError) {
    const base = PLAIN[err.code];
    // auth says why it refused a wallet-built sign-in message (its domain, chain, times): that reason is what the
    // user can act on, where "the signature did not match" would send them to try the same thing again.
    const refusal = /^Sign-in refused: (.+)$/s.exec(err.message)?.[1];
    if (err.code === 'INVALID_SIGNATURE' && refusal)
      return [`The service refused the sign-in message your wallet signed: ${refusal.replace(/\.?$/, '.')}`, err.hint].filter(Boolean).join(' ');
    if (err.code === 'VALIDATION_FAILED') return `${base}: ${err.message}`;
    if (err.code === 'RATE_LIMITED' && err.retryAfter) return `Too many requests in a short time. Try again in ${err.retryAfter} s.`;
    return base ?? err.message;
  }
  if (err instanceof TypeError && /fetch/i.test(err.message)) return 'The service cannot be reached. Check your connection and try again.';
  return err instanceof Error ? err.message : String(err);
}
