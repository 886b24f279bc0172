import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configDoc, configPagePath, END, SERVICES, START, serviceFields, sharedFields } from '../config-doc.ts';

describe('docs/configuration.md', () => {
  it('lists exactly the settings the config schemas read (run `node deploy/config-doc.ts --write` after changing one)', () => {
    const page = readFileSync(configPagePath, 'utf8');
    const tables = page.slice(page.indexOf(START) + START.length, page.indexOf(END)).trim();
    expect(tables).toBe(configDoc());
  });

  it('describes every setting (add `.describe()` to a schema field that has none)', () => {
    const fields = [...sharedFields(), ...(Object.keys(SERVICES) as (keyof typeof SERVICES)[]).flatMap(serviceFields)];
    expect(fields.length).toBeGreaterThan(150);
    expect(fields.filter((f) => f.description.trim() === '').map((f) => f.name)).toEqual([]);
  });
});
