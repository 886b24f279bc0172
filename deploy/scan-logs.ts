// Run after the whole test suite:   node deploy/scan-logs.ts [extra files or directories...]
//
// Reads every secret the tests recorded (packages/testkit/src/secrets.ts writes them, one per line,
// to <test log dir>/secrets/*.txt) and looks for each of them in every log file:
//   - the test log directory (.test-logs, or AGENTHOST_TEST_LOG_DIR): every process the tests started;
//   - $AGENTHOST_STATE/log (default /var/lib/agenthost/log): logs of the servers and services deploy/ starts;
//   - the Postgres server log ($AGENTHOST_STATE/pg/postgres.log): errors with statements;
//   - Docker's container logs (<docker root>/containers/*/*-json.log): what instances printed;
//   - any path given as an argument.
// A secret counts as found in its raw form and in its JSON-escaped and URL-encoded forms. Prints
// `log scan: N files, M secrets, 0 leaks`, or the file:line of each leak (never the secret) and exits 1.
// The recorded secrets are deleted afterwards in every case.
import { existsSync, lstatSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const testLogDir = process.env.AGENTHOST_TEST_LOG_DIR ?? path.join(repoRoot, '.test-logs');
const secretsDir = path.join(testLogDir, 'secrets');
const state = process.env.AGENTHOST_STATE ?? '/var/lib/agenthost';

interface Secret {
  index: number;
  length: number;
  forms: Buffer[];
}

function readSecrets(): Secret[] {
  if (!existsSync(secretsDir)) return [];
  const seen = new Set<string>();
  for (const f of readdirSync(secretsDir)) {
    if (!f.endsWith('.txt')) continue;
    for (const line of readFileSync(path.join(secretsDir, f), 'utf8').split('\n')) {
      if (line.length >= 8) seen.add(line);
    }
  }
  return [...seen].map((s, i) => {
    const forms = new Set([s, JSON.stringify(s).slice(1, -1), encodeURIComponent(s)]);
    return { index: i + 1, length: s.length, forms: [...forms].map((f) => Buffer.from(f, 'utf8')) };
  });
}

/** Regular files under a path (not following symlinks), skipping the secrets themselves. */
function* filesUnder(p: string, filter: (file: string) => boolean = () => true): Generator<string> {
  let st;
  try {
    st = lstatSync(p);
  } catch {
    return;
  }
  if (st.isSymbolicLink()) return;
  if (st.isFile()) {
    if (filter(p)) yield p;
    return;
  }
  if (!st.isDirectory() || path.resolve(p) === path.resolve(secretsDir)) return;
  let entries: string[];
  try {
    entries = readdirSync(p);
  } catch {
    return;
  }
  for (const e of entries.sort()) yield* filesUnder(path.join(p, e), filter);
}

function dockerRoot(): string | undefined {
  for (const candidate of [process.env.AGENTHOST_DOCKER_ROOT, path.join(state, 'docker'), '/var/lib/docker']) {
    if (candidate && existsSync(path.join(candidate, 'containers'))) return candidate;
  }
  return undefined;
}

function logFiles(): string[] {
  const files = new Set<string>();
  const add = (p: string, filter?: (f: string) => boolean) => {
    for (const f of filesUnder(p, filter)) files.add(path.resolve(f));
  };
  add(testLogDir);
  add(path.join(state, 'log'));
  add(path.join(state, 'pg', 'postgres.log'));
  const docker = dockerRoot();
  if (docker) add(path.join(docker, 'containers'), (f) => /-json\.log(\.\d+)?$/.test(f));
  for (const extra of process.argv.slice(2)) add(extra);
  return [...files];
}

function lineOf(buf: Buffer, offset: number): number {
  let line = 1;
  let i = buf.indexOf(10);
  while (i !== -1 && i < offset) {
    line++;
    i = buf.indexOf(10, i + 1);
  }
  return line;
}

const shown = (f: string): string => (f.startsWith(`${repoRoot}${path.sep}`) ? path.relative(repoRoot, f) : f);

function main(): number {
  const secrets = readSecrets();
  const files = logFiles();
  const leaks: string[] = [];
  for (const file of files) {
    let buf: Buffer;
    try {
      buf = readFileSync(file);
    } catch {
      continue;
    }
    const hits = new Map<number, Set<number>>();
    for (const s of secrets) {
      for (const form of s.forms) {
        for (let at = buf.indexOf(form); at !== -1; at = buf.indexOf(form, at + 1)) {
          const line = lineOf(buf, at);
          if (!hits.has(line)) hits.set(line, new Set());
          hits.get(line)!.add(s.index);
        }
      }
    }
    for (const [line, which] of [...hits].sort((a, b) => a[0] - b[0])) {
      const desc = [...which].map((i) => `#${i} (${secrets[i - 1]!.length} chars)`).join(', ');
      leaks.push(`${shown(file)}:${line}: secret ${desc}`);
    }
  }
  if (secrets.length === 0) process.stderr.write(`log scan: no recorded secrets under ${shown(secretsDir)} (did the tests run?)\n`);
  if (leaks.length > 0) {
    process.stdout.write(`log scan: ${files.length} files, ${secrets.length} secrets, ${leaks.length} leaks\n`);
    for (const l of leaks) process.stdout.write(`  LEAK ${l}\n`);
    return 1;
  }
  process.stdout.write(`log scan: ${files.length} files, ${secrets.length} secrets, 0 leaks\n`);
  return 0;
}

let code = 2;
try {
  code = main();
} finally {
  rmSync(secretsDir, { recursive: true, force: true });
}
process.exit(code);
