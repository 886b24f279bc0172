import { contracts, endpoint, runService } from '@agenthost/shared';
import { authConfig } from './config.ts';
import type { AuthDB } from './db/schema.ts';
import { migrations } from './db/migrations/index.ts';
import { loadKeys } from './domain/keys.ts';
import { pruneRevoked, revokedTokens, revokeToken } from './domain/revocation.ts';
import { createNonce, login, pruneNonces } from './domain/sessions.ts';

await runService<typeof authConfig, AuthDB>({
  name: 'auth',
  version: '1.0.0',
  config: authConfig,
  db: { schema: 'auth', migrations },
  async build({ config, db, log, nc }) {
    const keys = await loadKeys({
      configuredPem: config.AUTH_JWT_PRIVATE_KEY,
      pemFile: config.AUTH_JWT_PRIVATE_KEY_FILE,
      previousJwks: config.AUTH_JWT_PREVIOUS_KEYS,
    });
    const deps = { db, config, key: keys.signing };
    let pruner: NodeJS.Timeout | undefined;
    return {
      endpoints: [
        endpoint(contracts.auth.nonceCreate, (input) => createNonce(deps, input.wallet_address)),
        endpoint(contracts.auth.login, (input) => login(deps, input)),
        endpoint(contracts.auth.jwks, async () => ({ keys: keys.jwks as never })),
        endpoint(contracts.auth.revoke, (input) => revokeToken(db, nc, input)),
        endpoint(contracts.auth.revokedList, () => revokedTokens(db)),
      ],
      async start() {
        pruner = setInterval(() => {
          void pruneNonces(db).catch((err) => log.warn({ err }, 'nonce pruning failed'));
          void pruneRevoked(db).catch((err) => log.warn({ err }, 'revoked token pruning failed'));
        }, config.NONCE_PURGE_INTERVAL_SECONDS * 1000);
        pruner.unref();
      },
      async stop() {
        clearInterval(pruner);
      },
    };
  },
});
