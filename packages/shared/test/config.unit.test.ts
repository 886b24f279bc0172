import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { baseConfig, ConfigError, parseConfig, parseTiers, DEFAULT_TIERS, tiersConfig } from '../src/index.ts';

describe('configuration', () => {
  it('reports every problem at once, not just the first', () => {
    const schema = baseConfig.extend({ PORT: z.coerce.number().int().min(1), NAME: z.string().min(1) });
    try {
      parseConfig(schema, { DATABASE_URL: 'mysql://x', PORT: 'abc', LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      expect(problems).toMatch(/DATABASE_URL/);
      expect(problems).toMatch(/PORT/);
      expect(problems).toMatch(/LOG_LEVEL/);
      expect(problems).toMatch(/NAME/);
    }
  });

  it('freezes the parsed config', () => {
    const cfg = parseConfig(baseConfig, {});
    expect(Object.isFrozen(cfg)).toBe(true);
    expect(cfg.NATS_URL).toBe('nats://127.0.0.1:4222');
  });

  it('reads a secret from <NAME>_FILE (a swarm secret), and refuses an unreadable file or both forms', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'database-url');
    writeFileSync(file, 'postgres://svc:s3cret@db:5432/agenthost\n', { mode: 0o600 });
    expect(parseConfig(baseConfig, { DATABASE_URL_FILE: file }).DATABASE_URL).toBe('postgres://svc:s3cret@db:5432/agenthost');
    expect(() => parseConfig(baseConfig, { DATABASE_URL_FILE: join(dir, 'missing') })).toThrow(/DATABASE_URL_FILE: cannot read .*ENOENT/);
    expect(() => parseConfig(baseConfig, { DATABASE_URL_FILE: file, DATABASE_URL: 'postgres://x@y/z' })).toThrow(/keep one/);
    rmSync(dir, { recursive: true });
  });

  it('merges tier overrides over the spec defaults', () => {
    const t = parseTiers('{"free":{"requests_per_day":5}}');
    expect(t.free.requests_per_day).toBe(5);
    expect(t.free.instances).toBe(DEFAULT_TIERS.free.instances);
    expect(t.pro).toEqual(DEFAULT_TIERS.pro);
    expect(DEFAULT_TIERS.free.requests_per_day).toBe(1000);
  });

  it('refuses a broken tier table with a readable problem', () => {
    const schema = z.object({ TIER_LIMITS_JSON: tiersConfig });
    expect(() => parseConfig(schema, { TIER_LIMITS_JSON: '{"gold":{}}' })).toThrow(/TIER_LIMITS_JSON/);
    expect(() => parseConfig(schema, { TIER_LIMITS_JSON: 'not json' })).toThrow(/TIER_LIMITS_JSON/);
  });
});
