import { randomBytes } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { buildAgentEnv, decryptKeys, FatalError, fetchKeys, resolveCommand } from '../src/bootstrap.mjs';
import { seal } from './helpers.ts';

const key = randomBytes(32);
const instanceKey = key.toString('base64');
const instanceId = 'inst-1';

type Line = { level: string; msg: string; fields: Record<string, unknown> };
function capture() {
  const lines: Line[] = [];
  const log = (level: string, msg: string, fields: Record<string, unknown> = {}) => {
    lines.push({ level, msg, fields });
  };
  return { lines, log };
}

describe('decryptKeys', () => {
  it('decrypts good keys and skips bad ones, logging only names', () => {
    const { lines, log } = capture();
    const keys = {
      GOOD: seal(key, instanceId, 'GOOD', 'good-value'),
      ALSO_GOOD: seal(key, instanceId, 'ALSO_GOOD', 'second-value'),
      WRONG_NAME: seal(key, instanceId, 'SOMETHING_ELSE', 'canary-1'),
      'bad-name': seal(key, instanceId, 'bad-name', 'canary-2'),
      '1STARTS_WITH_DIGIT': seal(key, instanceId, '1STARTS_WITH_DIGIT', 'canary-3'),
      AGENTHOST_INSTANCE_SECRET: seal(key, instanceId, 'AGENTHOST_INSTANCE_SECRET', 'canary-4'),
      NOT_SEALED: 'garbage',
      NUMBER: 42,
    };
    const result = decryptKeys({ keys, instanceId, instanceKey, log });
    expect(result.env).toEqual({ GOOD: 'good-value', ALSO_GOOD: 'second-value' });
    expect(result.loaded.sort()).toEqual(['ALSO_GOOD', 'GOOD']);
    expect(result.skipped.map((s: { name: string }) => s.name).sort()).toEqual(
      ['1STARTS_WITH_DIGIT', 'AGENTHOST_INSTANCE_SECRET', 'NOT_SEALED', 'NUMBER', 'WRONG_NAME', 'bad-name'].sort(),
    );
    const text = JSON.stringify(lines);
    for (const canary of ['good-value', 'second-value', 'canary-1', 'canary-2', 'canary-3', 'canary-4', instanceKey]) {
      expect(text).not.toContain(canary);
    }
    expect(lines.filter((l) => l.msg === 'skipping key')).toHaveLength(6);
  });
});

describe('buildAgentEnv', () => {
  it('removes the instance credentials and adds the keys (keys win)', () => {
    const env = buildAgentEnv(
      {
        PATH: '/bin',
        AGENTHOST_INSTANCE_ID: 'i',
        AGENTHOST_INSTANCE_SECRET: 's',
        AGENTHOST_INSTANCE_KEY: 'k',
        FOO: 'image',
        UNSET: undefined,
      },
      { FOO: 'key', BAR: 'b' },
    );
    expect(env).toEqual({ PATH: '/bin', AGENTHOST_INSTANCE_ID: 'i', FOO: 'key', BAR: 'b' });
  });
});

describe('resolveCommand', () => {
  it('searches PATH and keeps paths', () => {
    expect(resolveCommand('sh', '/nonexistent:/bin:/usr/bin')).toMatch(/\/sh$/);
    expect(resolveCommand('definitely-not-a-command-xyz', '/bin:/usr/bin')).toBeNull();
    expect(resolveCommand('/abs/thing', '/bin')).toBe('/abs/thing');
  });
});

function response(status: number, body: unknown = '', headers: Record<string, string> = {}) {
  return new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, headers });
}

describe('fetchKeys', () => {
  const base = { url: 'http://gw.test/api/keys/retrieve', instanceId, instanceSecret: 'sec-ret', sleep: async () => {} };

  it('sends the instance headers, refuses redirects, returns the keys map', async () => {
    const fetchImpl = vi.fn(async (_url: string, init: RequestInit) => {
      const h = init.headers as Record<string, string>;
      expect(h['x-instance-id']).toBe(instanceId);
      expect(h['x-instance-secret']).toBe('sec-ret');
      expect(init.redirect).toBe('manual');
      return response(200, { keys: { A: 'x' } });
    });
    await expect(fetchKeys({ ...base, fetchImpl: fetchImpl as unknown as typeof fetch })).resolves.toEqual({ A: 'x' });
    expect(fetchImpl).toHaveBeenCalledTimes(1);
  });

  it('retries 503, 429 and network errors, then succeeds', async () => {
    const answers = [
      () => response(503),
      () => response(429, '', { 'retry-after': '0' }),
      () => {
        throw new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } });
      },
      () => response(200, { keys: {} }),
    ];
    let i = 0;
    const fetchImpl = vi.fn(async () => answers[i++]!());
    const { lines, log } = capture();
    await expect(fetchKeys({ ...base, fetchImpl: fetchImpl as unknown as typeof fetch, log })).resolves.toEqual({});
    expect(fetchImpl).toHaveBeenCalledTimes(4);
    expect(lines.filter((l) => l.msg === 'keys fetch failed, retrying')).toHaveLength(3);
    expect(JSON.stringify(lines)).not.toContain('sec-ret');
  });

  it.each([401, 403, 404, 400, 302])('fails at once on HTTP %i', async (status) => {
    const fetchImpl = vi.fn(async () => response(status));
    await expect(fetchKeys({ ...base, fetchImpl: fetchImpl as unknown as typeof fetch })).rejects.toBeInstanceOf(FatalError);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
  });

  it('gives up when the deadline passes', async () => {
    let t = 0;
    const fetchImpl = vi.fn(async () => response(502));
    const err = await fetchKeys({
      ...base,
      timeoutMs: 3000,
      now: () => t,
      sleep: async (ms: number) => {
        t += ms;
      },
      fetchImpl: fetchImpl as unknown as typeof fetch,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FatalError);
    expect(String((err as Error).message)).toMatch(/within 3000 ms .*HTTP 502/);
    expect(fetchImpl.mock.calls.length).toBeGreaterThan(2);
  });

  it('rejects bodies without a keys object and bad URLs', async () => {
    for (const body of ['nope', { keys: [] }, { other: 1 }]) {
      const fetchImpl = async () => response(200, body);
      await expect(fetchKeys({ ...base, fetchImpl: fetchImpl as unknown as typeof fetch })).rejects.toBeInstanceOf(FatalError);
    }
    await expect(fetchKeys({ ...base, url: 'ftp://x/y' })).rejects.toBeInstanceOf(FatalError);
    await expect(fetchKeys({ ...base, url: '::' })).rejects.toBeInstanceOf(FatalError);
  });
});
