// Prints the error code table (docs/errors.md) from packages/shared/src/errors.ts, the one place codes live.
// `node deploy/error-table.ts --write` rewrites the table between the markers in docs/errors.md; a test checks
// that the page matches, so the table cannot drift from the code.
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

export const errorsPagePath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/errors.md');

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const table = errorTable();
  if (process.argv.includes('--write')) {
    const page = readFileSync(errorsPagePath, 'utf8');
    const start = page.indexOf(START);
    const end = page.indexOf(END);
    if (start < 0 || end < 0) throw new Error('docs/errors.md has no error table markers');
    writeFileSync(errorsPagePath, `${page.slice(0, start + START.length)}\n${table}\n${page.slice(end)}`);
  } else {
    process.stdout.write(`${table}\n`);
  }
}
