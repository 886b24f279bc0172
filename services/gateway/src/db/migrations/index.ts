import type { Migration } from 'kysely';
import * as usage from './2026-11-22T00-00-00-usage.ts';

export const migrations: Record<string, Migration> = {
  '2026-11-22T00-00-00-usage': usage,
};
