// Standard provider keys reach OpenClaw's built-in providers with no config edit. With key hot reload the keys are
// not in the agent's environment, so OpenClaw's own fallbacks (OPENAI_API_KEY, ...) never see them: instead, a key
// stored under a provider's usual variable name is wired into the config as that provider's apiKey, a SecretRef on
// the platform's exec provider (`models.providers.<id>.apiKey = {source:"exec",provider:"agenthost",id:<NAME>}`).
// Only the reference is written, never the key. A provider whose key the user's config already sets keeps the
// user's; a reference we wrote is removed again when its key is deleted. Any other key name stays available by
// reference, as before.
//
// The table follows OpenClaw 2026.9.6: each bundled plugin's `openclaw.plugin.json` (setup.providers[].envVars) and
// its catalog of official external providers (groq, mistral, deepseek, ...), limited to model providers whose
// credential is a plain API key and whose id OpenClaw accepts as a built-in `models.providers` overlay (an overlay
// with only an apiKey). Where a provider reads several names, the first one stored wins, in OpenClaw's order.
// Zero dependencies, like every file of the bootstrap (the OpenClaw image's launch.mjs imports it too).
import fs from 'node:fs';
import path from 'node:path';

export const SECRET_PROVIDER = 'agenthost';

/** provider id -> variable names, in the order OpenClaw reads them. */
export const PROVIDER_KEYS = Object.freeze({
  openai: ['OPENAI_API_KEY'],
  anthropic: ['ANTHROPIC_API_KEY'],
  google: ['GEMINI_API_KEY', 'GOOGLE_API_KEY'],
  openrouter: ['OPENROUTER_API_KEY'],
  groq: ['GROQ_API_KEY'],
  mistral: ['MISTRAL_API_KEY'],
  xai: ['XAI_API_KEY'],
  deepseek: ['DEEPSEEK_API_KEY'],
  together: ['TOGETHER_API_KEY'],
  fireworks: ['FIREWORKS_API_KEY'],
  cerebras: ['CEREBRAS_API_KEY'],
  deepinfra: ['DEEPINFRA_API_KEY'],
  huggingface: ['HUGGINGFACE_HUB_TOKEN', 'HF_TOKEN'],
  nvidia: ['NVIDIA_API_KEY'],
  moonshot: ['MOONSHOT_API_KEY'],
  minimax: ['MINIMAX_API_KEY'],
  venice: ['VENICE_API_KEY'],
  zai: ['ZAI_API_KEY', 'Z_AI_API_KEY'],
  litellm: ['LITELLM_API_KEY'],
  'vercel-ai-gateway': ['AI_GATEWAY_API_KEY'],
  kilocode: ['KILOCODE_API_KEY'],
  qianfan: ['QIANFAN_API_KEY'],
  xiaomi: ['XIAOMI_API_KEY'],
  chutes: ['CHUTES_API_KEY'],
  arcee: ['ARCEEAI_API_KEY'],
});

/** The SecretRef that hands key `name` to OpenClaw through the platform's exec provider. */
export function keyRef(name) {
  return { source: 'exec', provider: SECRET_PROVIDER, id: name };
}

/** A reference this module writes for `providerId` (so ours to change), as opposed to anything the user set. */
function isOurRef(value, providerId) {
  return (
    value !== null &&
    typeof value === 'object' &&
    Object.keys(value).length === 3 &&
    value.source === 'exec' &&
    value.provider === SECRET_PROVIDER &&
    PROVIDER_KEYS[providerId].includes(value.id)
  );
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The config with the stored standard keys wired (and the ones no longer stored unwired). Pure: `config` is not
 * changed. `names` are the names of the stored keys.
 * @returns {{ config: object, wired: string[], userSet: string[] }} wired: provider ids wired to a stored key;
 *   userSet: provider ids with a stored standard key whose key the user's config sets itself (left alone).
 */
export function wireProviderKeys(config, names) {
  const stored = new Set(names);
  const next = structuredClone(isObject(config) ? config : {});
  const wired = [];
  const userSet = [];
  for (const [providerId, candidates] of Object.entries(PROVIDER_KEYS)) {
    const name = candidates.find((n) => stored.has(n));
    const entry = next.models?.providers?.[providerId];
    const current = isObject(entry) ? entry.apiKey : undefined;
    if (current !== undefined && !isOurRef(current, providerId)) {
      if (name) userSet.push(providerId);
      continue;
    }
    if (name) {
      if (!isObject(next.models)) next.models = {};
      if (!isObject(next.models.providers)) next.models.providers = {};
      next.models.providers[providerId] = { ...next.models.providers[providerId], apiKey: keyRef(name) };
      wired.push(providerId);
    } else if (current !== undefined) {
      // Its key was deleted: drop our reference (and what only held it), so no stale ref is left to fail.
      delete entry.apiKey;
      if (Object.keys(entry).length === 0) delete next.models.providers[providerId];
      if (Object.keys(next.models.providers).length === 0) delete next.models.providers;
      if (Object.keys(next.models).length === 0) delete next.models;
    }
  }
  return { config: next, wired, userSet };
}

/** Where OpenClaw reads its config, from the agent's environment (as OpenClaw resolves it). */
export function openclawConfigPath(env) {
  const home = env.OPENCLAW_HOME || env.HOME || '/data/home';
  const stateDir = env.OPENCLAW_STATE_DIR || path.join(home, '.openclaw');
  return env.OPENCLAW_CONFIG_PATH || path.join(stateDir, 'openclaw.json');
}

/**
 * Rewrites the config file with the wiring for `names` when it changes (atomically, mode 0600). A missing config
 * or one that is not plain JSON (JSON5, $include) is left alone. Never throws.
 * @returns {{ changed: boolean, wired: string[], userSet: string[] }}
 */
export function applyProviderKeys({ configPath, names, log = () => {} }) {
  let text;
  let config;
  try {
    text = fs.readFileSync(configPath, 'utf8');
    config = JSON.parse(text);
  } catch (err) {
    if (err?.code !== 'ENOENT') log('warn', 'config is not plain JSON; provider keys not wired', { path: configPath, error: err?.code ?? 'parse' });
    return { changed: false, wired: [], userSet: [] };
  }
  if (!isObject(config)) return { changed: false, wired: [], userSet: [] };
  const result = wireProviderKeys(config, names);
  const changed = JSON.stringify(result.config) !== JSON.stringify(config);
  if (changed) {
    const tmp = `${configPath}.agenthost-${process.pid}`;
    try {
      fs.writeFileSync(tmp, `${JSON.stringify(result.config, null, 2)}\n`, { mode: 0o600 });
      fs.renameSync(tmp, configPath);
    } catch (err) {
      fs.rmSync(tmp, { force: true });
      log('warn', 'could not wire provider keys', { path: configPath, error: err?.code ?? String(err) });
      return { changed: false, wired: [], userSet: [] };
    }
  }
  if (changed || result.userSet.length) log('info', 'provider keys wired', { wired: result.wired, user_set: result.userSet, changed });
  return { changed, wired: result.wired, userSet: result.userSet };
}
