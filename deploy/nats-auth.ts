// Writes what deploy's nats-server needs for least privilege (see packages/shared/src/nats/setup.ts):
// a CA and server certificate, one nkey seed per service and the operator, and nats.conf.
// Usage: node deploy/nats-auth.ts <dir> <host> <port> <jetstream store dir> [extra certificate hosts...]
import { ensureNatsTls, writeNatsAuth } from '../packages/shared/src/nats/setup.ts';
import path from 'node:path';

const [dir, host, port, storeDir, ...hosts] = process.argv.slice(2);
if (!dir || !host || !port || !storeDir) {
  process.stderr.write('usage: node deploy/nats-auth.ts <dir> <host> <port> <store dir> [certificate hosts...]\n');
  process.exit(2);
}
const tls = ensureNatsTls(path.join(dir, 'tls'), hosts);
const auth = writeNatsAuth(dir, { host, port: Number(port), storeDir, tls });
process.stdout.write(`${auth.configFile}\n`);
