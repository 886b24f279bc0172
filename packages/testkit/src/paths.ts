import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** Every process a test starts writes its log here; deploy/scan-logs.ts reads them all after the run. */
export const testLogDir = process.env.AGENTHOST_TEST_LOG_DIR ?? path.join(repoRoot, '.test-logs');
