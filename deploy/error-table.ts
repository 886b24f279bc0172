// Prints the README's error code table from packages/shared/src/errors.ts, the one place codes live.
// `node deploy/error-table.ts --write` rewrites the table between the README's markers; a test checks
// that the README matches, so the table cannot drift from the code.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES } from '../packages/shared/src/errors.ts';

export const START = '<!-- error-table:start -->';
export const END = '<!-- error-table:end -->';

export function errorTable(): string {
  const rows = Object.entries(ERROR_CODES)
    .sort(([a, x], [b, y]) => x.status - y.status || a.localeCompare(b))
    .map(([code, { status, message }]) => `| ${status} | \`${code}\` | ${message} |`);
  return ['| Status | Code | Meaning |', '|---|---|---|', ...rows].join('\n');
}

export const readmePath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../README.md');

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const table = errorTable();
  if (process.argv.includes('--write')) {
    const readme = readFileSync(readmePath, 'utf8');
    const start = readme.indexOf(START);
    const end = readme.indexOf(END);
    if (start < 0 || end < 0) throw new Error('README has no error table markers');
    writeFileSync(readmePath, `${readme.slice(0, start + START.length)}\n${table}\n${readme.slice(end)}`);
  } else {
    process.stdout.write(`${table}\n`);
  }
}
