import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { END, errorTable, readmePath, START } from '../../../deploy/error-table.ts';

describe('README', () => {
  it('lists exactly the error codes the code uses (run `node deploy/error-table.ts --write` after adding one)', () => {
    const readme = readFileSync(readmePath, 'utf8');
    const table = readme.slice(readme.indexOf(START) + START.length, readme.indexOf(END)).trim();
    expect(table).toBe(errorTable());
  });
});
