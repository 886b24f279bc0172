import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { END, errorTable, errorsPagePath, START } from '../../../deploy/error-table.ts';

describe('docs/errors.md', () => {
  it('lists exactly the error codes the code uses (run `node deploy/error-table.ts --write` after adding one)', () => {
    const page = readFileSync(errorsPagePath, 'utf8');
    const table = page.slice(page.indexOf(START) + START.length, page.indexOf(END)).trim();
    expect(table).toBe(errorTable());
  });
});
