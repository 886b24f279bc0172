import type { Migration } from 'kysely';
import * as init from './2026-11-22T00-00-00-init.ts';

export const migrations: Record<string, Migration> = {
  '2026-11-22T00-00-00-init': init,
};
