import { children, counter } from '@agenthost/shared';

// keyvault's metrics: how often keys are sealed and opened under the master keyring, and refused instances.
// Never a key name, instance or user id as a label.

const ops = counter('agenthost_keyvault_operations_total', 'Keys sealed or opened under the master keyring, by operation and outcome (ok, failed)', [
  'operation',
  'outcome',
]);
const opChild = children((op, outcome) => ops.labels(op!, outcome!));

/** Count a seal or open around fn (a failed open is a tampered or mis-bound ciphertext). */
export function countOperation<T>(operation: 'seal' | 'open', fn: () => T): T {
  try {
    const out = fn();
    opChild(operation, 'ok').inc();
    return out;
  } catch (err) {
    opChild(operation, 'failed').inc();
    throw err;
  }
}

const authFailures = counter(
  'agenthost_keyvault_instance_auth_failures_total',
  'Instance authentications refused, by reason (malformed_instance_id, missing_secret, unknown_instance, wrong_secret)',
  ['reason'],
);
const authChild = children((reason) => authFailures.labels(reason!));
export const observeAuthFailure = (reason: string): void => authChild(reason).inc();
