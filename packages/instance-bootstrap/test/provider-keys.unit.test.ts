// Which stored key names are wired to which OpenClaw provider, and that a user's own setting always wins.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startKeyServer, askKeyServer } from '../src/key-server.mjs';
import { applyProviderKeys, keyRef, openclawConfigPath, PROVIDER_KEYS, wireProviderKeys } from '../src/provider-keys.mjs';

const apiKeyOf = (config: Record<string, unknown>, provider: string) =>
  (config as { models?: { providers?: Record<string, { apiKey?: unknown }> } }).models?.providers?.[provider]?.apiKey;

describe('standard provider keys', () => {
  it.each([
    ['OPENAI_API_KEY', 'openai'],
    ['ANTHROPIC_API_KEY', 'anthropic'],
    ['GEMINI_API_KEY', 'google'],
    ['GOOGLE_API_KEY', 'google'],
    ['OPENROUTER_API_KEY', 'openrouter'],
    ['GROQ_API_KEY', 'groq'],
    ['MISTRAL_API_KEY', 'mistral'],
    ['XAI_API_KEY', 'xai'],
    ['DEEPSEEK_API_KEY', 'deepseek'],
    ['TOGETHER_API_KEY', 'together'],
  ])('%s is wired to models.providers.%s.apiKey through the agenthost secret provider', (name, provider) => {
    const { config, wired } = wireProviderKeys({ gateway: { mode: 'local' } }, [name]);
    expect(wired).toEqual([provider]);
    expect(apiKeyOf(config, provider)).toEqual({ source: 'exec', provider: 'agenthost', id: name });
    expect(config.gateway).toEqual({ mode: 'local' });
  });

  it('leaves any other name to be referenced by hand, and never writes a value', () => {
    const { config, wired } = wireProviderKeys({}, ['MY_SERVICE_TOKEN', 'openai_api_key']);
    expect(wired).toEqual([]);
    expect(config).toEqual({});
  });

  it("takes a provider's first name in OpenClaw's order when several are stored", () => {
    expect(apiKeyOf(wireProviderKeys({}, ['GOOGLE_API_KEY', 'GEMINI_API_KEY']).config, 'google')).toEqual(keyRef('GEMINI_API_KEY'));
    expect(apiKeyOf(wireProviderKeys({}, ['HF_TOKEN']).config, 'huggingface')).toEqual(keyRef('HF_TOKEN'));
  });

  it("keeps the user's own key setting, whatever it is, and says so", () => {
    for (const own of ['sk-typed-in', { source: 'env', provider: 'default', id: 'OPENAI_API_KEY' }, keyRef('MY_OPENAI')]) {
      const user = { models: { providers: { openai: { baseUrl: 'https://proxy.example/v1', apiKey: own } } } };
      const { config, wired, userSet } = wireProviderKeys(user, ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY']);
      expect(apiKeyOf(config, 'openai')).toEqual(own);
      expect(wired).toEqual(['anthropic']);
      expect(userSet).toEqual(['openai']);
    }
  });

  it("adds the key to the user's provider settings without touching the rest", () => {
    const user = { models: { mode: 'merge', providers: { openai: { baseUrl: 'http://stub/v1', api: 'openai-completions' } } } };
    const { config } = wireProviderKeys(user, ['OPENAI_API_KEY']);
    expect(config.models).toEqual({
      mode: 'merge',
      providers: { openai: { baseUrl: 'http://stub/v1', api: 'openai-completions', apiKey: keyRef('OPENAI_API_KEY') } },
    });
    expect(user.models.providers.openai).not.toHaveProperty('apiKey');
  });

  it('unwires a deleted key, removing only what it added', () => {
    const wired = wireProviderKeys({ models: { providers: { openai: { baseUrl: 'http://stub/v1' } } } }, ['OPENAI_API_KEY', 'GROQ_API_KEY']).config;
    const { config } = wireProviderKeys(wired, []);
    expect(config).toEqual({ models: { providers: { openai: { baseUrl: 'http://stub/v1' } } } });
    expect(wireProviderKeys(wireProviderKeys({ gateway: {} }, ['GROQ_API_KEY']).config, []).config).toEqual({ gateway: {} });
  });

  it("moves a provider to its other stored name when the one wired is deleted, and leaves a user's ref alone", () => {
    const both = wireProviderKeys({}, ['GEMINI_API_KEY', 'GOOGLE_API_KEY']).config;
    expect(apiKeyOf(wireProviderKeys(both, ['GOOGLE_API_KEY']).config, 'google')).toEqual(keyRef('GOOGLE_API_KEY'));
    const user = { models: { providers: { openai: { apiKey: keyRef('MY_OPENAI') } } } };
    expect(wireProviderKeys(user, []).config).toEqual(user);
  });

  it('maps every name to one provider only', () => {
    const names = Object.values(PROVIDER_KEYS).flat();
    expect(new Set(names).size).toBe(names.length);
  });

  it('finds the config where OpenClaw does', () => {
    expect(openclawConfigPath({ OPENCLAW_STATE_DIR: '/data/home/.openclaw' })).toBe('/data/home/.openclaw/openclaw.json');
    expect(openclawConfigPath({ HOME: '/h' })).toBe('/h/.openclaw/openclaw.json');
    expect(openclawConfigPath({ OPENCLAW_CONFIG_PATH: '/c.json', OPENCLAW_STATE_DIR: '/s' })).toBe('/c.json');
  });
});

describe('the config file', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  const tmp = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'provider-keys-'));
    dirs.push(d);
    return d;
  };

  it('is rewritten only when the wiring changes, private to its user, with no value in it', () => {
    const configPath = path.join(tmp(), 'openclaw.json');
    fs.writeFileSync(configPath, JSON.stringify({ gateway: { mode: 'local' } }));
    expect(applyProviderKeys({ configPath, names: ['OPENAI_API_KEY'] }).changed).toBe(true);
    expect(fs.statSync(configPath).mode & 0o777).toBe(0o600);
    expect(JSON.parse(fs.readFileSync(configPath, 'utf8'))).toEqual({
      gateway: { mode: 'local' },
      models: { providers: { openai: { apiKey: keyRef('OPENAI_API_KEY') } } },
    });
    const before = fs.statSync(configPath).mtimeMs;
    expect(applyProviderKeys({ configPath, names: ['OPENAI_API_KEY', 'OTHER'] }).changed).toBe(false);
    expect(fs.statSync(configPath).mtimeMs).toBe(before);
    expect(applyProviderKeys({ configPath, names: [] }).changed).toBe(true);
    expect(JSON.parse(fs.readFileSync(configPath, 'utf8'))).toEqual({ gateway: { mode: 'local' } });
  });

  it('is left alone when missing or not plain JSON', () => {
    const dir = tmp();
    expect(applyProviderKeys({ configPath: path.join(dir, 'none.json'), names: ['OPENAI_API_KEY'] }).changed).toBe(false);
    expect(fs.existsSync(path.join(dir, 'none.json'))).toBe(false);
    const json5 = path.join(dir, 'openclaw.json');
    fs.writeFileSync(json5, '{ gateway: { mode: "local" }, // JSON5\n}');
    expect(applyProviderKeys({ configPath: json5, names: ['OPENAI_API_KEY'] }).changed).toBe(false);
    expect(fs.readFileSync(json5, 'utf8')).toContain('// JSON5');
  });
});

describe('the key server', () => {
  it('hands out the names alone to whoever holds the token', async () => {
    const server = await startKeyServer({ getKeys: () => ({ OPENAI_API_KEY: 'sk-value', OTHER: 'v' }), dir: os.tmpdir() });
    try {
      const reply = await askKeyServer({ socketPath: server.socketPath, token: server.token, names: true });
      expect(reply.names).toEqual(['OPENAI_API_KEY', 'OTHER']);
      expect(JSON.stringify(reply)).not.toContain('sk-value');
      await expect(askKeyServer({ socketPath: server.socketPath, token: 'wrong', names: true })).rejects.toThrow(/unauthorized/);
    } finally {
      server.close();
    }
  });
});
