// Re-seal every stored key under the current master key (MASTER_KEY_ID / MASTER_KEY_ENCRYPTION),
// opening old ones with MASTER_KEYS_PREVIOUS. Same environment as the service; safe to run while it
// serves and to run again.   node services/keyvault/src/reseal.ts   (pnpm --filter @agenthost/keyvault reseal)
import { connect, createLogger, loadConfig } from '@agenthost/shared';
import { keyringFrom, keyvaultConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';
import type { KeyvaultDB } from './db/schema.ts';
import { resealAll } from './domain/reseal.ts';

const config = loadConfig(keyvaultConfig);
const log = createLogger('keyvault-reseal', config.LOG_LEVEL);
const keyring = keyringFrom(config);
const db = await connect<KeyvaultDB>({ url: config.DATABASE_URL, schema: 'keyvault', migrations, poolSize: 2 });
let code = 0;
try {
  const report = await resealAll(db, keyring, log);
  log.info({ event: 'reseal_done', ...report }, 'reseal finished');
  process.stdout.write(`${JSON.stringify(report)}\n`);
  if (report.failed > 0) code = 1;
} catch (err) {
  log.error({ err }, 'reseal aborted');
  code = 1;
} finally {
  await db.destroy();
}
process.exit(code);
