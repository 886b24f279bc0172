import { consumeEvents, contracts, endpoint, runService, SealOpener, type Subscription } from '@agenthost/shared';
import { keyringFrom, keyvaultConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';
import type { KeyvaultDB } from './db/schema.ts';
import { AuthLimiter } from './domain/limiter.ts';
import { instanceDeleted, issueCredentials, retrieveKeys } from './domain/instance-access.ts';
import { deleteKeys, listAudit, listKeys, storeKeys, updateKey, type VaultDeps } from './domain/vault.ts';

const kv = contracts.keyvault;

await runService<typeof keyvaultConfig, KeyvaultDB>({
  name: 'keyvault',
  version: '1.0.0',
  config: keyvaultConfig,
  db: { schema: 'keyvault', migrations },
  async build({ config, db, log, nc }) {
    const keyring = keyringFrom(config);
    const limiter = new AuthLimiter(
      db,
      {
        maxPerIp: config.INSTANCE_AUTH_MAX_FAILURES_PER_IP,
        maxPerInstance: config.INSTANCE_AUTH_MAX_FAILURES_PER_INSTANCE,
        windowSeconds: config.INSTANCE_AUTH_WINDOW_SECONDS,
      },
      log,
    );
    const opener = new SealOpener(config.KEYVAULT_SEAL_PRIVATE_KEY);
    const deps: VaultDeps = { db, keyring, limiter, opener, log, maxKeysPerInstance: config.MAX_KEYS_PER_INSTANCE };
    log.info({ event: 'keyring', current_key_id: keyring.currentId, key_ids: keyring.ids(), seal_public_key: opener.publicKey }, 'master keyring loaded');
    let consumer: Subscription | undefined;
    return {
      endpoints: [
        endpoint(kv.issueCredentials, (input) => issueCredentials(deps, input)),
        endpoint(kv.purgeInstance, (input) => instanceDeleted(deps, input)),
        endpoint(kv.store, (input) => storeKeys(deps, input)),
        endpoint(kv.update, (input) => updateKey(deps, input)),
        endpoint(kv.remove, (input) => deleteKeys(deps, input)),
        endpoint(kv.list, (input) => listKeys(deps, input)),
        endpoint(kv.audit, (input) => listAudit(deps, input)),
        endpoint(kv.retrieve, (input) => retrieveKeys(deps, input)),
      ],
      async start() {
        // Durable: a deletion that happened while keyvault was down is delivered when it is back.
        consumer = await consumeEvents(
          nc,
          contracts.provisioner.instanceDeleted,
          'keyvault-instance-deleted',
          async (ev) => void (await instanceDeleted(deps, ev)),
          log,
        );
      },
      async stop() {
        await consumer?.stop();
      },
    };
  },
});
