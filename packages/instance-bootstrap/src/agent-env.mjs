// What the agent is given: the keys that open (by name; bad ones skipped) and its environment without the
// instance credentials. Zero dependencies, like every file of the bootstrap.
import { KEY_NAME_RE, openKey } from './crypto.mjs';

/** Variables the agent must never see. */
export const STRIPPED_ENV = Object.freeze(['AGENTHOST_INSTANCE_SECRET', 'AGENTHOST_INSTANCE_KEY']);
/** Key names with this prefix are reserved for the platform and never injected. */
export const RESERVED_PREFIX = 'AGENTHOST_';

function describeName(name) {
  // Names are not secret, but an arbitrary string from the server is capped for the log.
  return name.length > 100 ? `${name.slice(0, 100)}…` : name;
}

/**
 * Decrypts every sealed key; bad ones are skipped (logged by name only).
 * @returns {{ env: Record<string,string>, loaded: string[], skipped: {name: string, reason: string}[] }}
 */
export function decryptKeys({ keys, instanceId, instanceKey, log = () => {} }) {
  const env = {};
  const loaded = [];
  const skipped = [];
  for (const [name, sealed] of Object.entries(keys)) {
    let reason;
    if (!KEY_NAME_RE.test(name)) {
      reason = 'name is not a valid environment variable name';
    } else if (name.toUpperCase().startsWith(RESERVED_PREFIX)) {
      reason = `names starting with ${RESERVED_PREFIX} are reserved`;
    } else {
      try {
        env[name] = openKey({ instanceKey, instanceId, keyName: name, sealed });
        loaded.push(name);
        continue;
      } catch (err) {
        reason = err?.name === 'KeyOpenError' ? err.message : 'decryption failed';
      }
    }
    skipped.push({ name, reason });
    log('warn', 'skipping key', { key_name: describeName(name), reason });
  }
  return { env, loaded, skipped };
}

/** The agent's environment: own env minus the instance credentials plus the decrypted keys. */
export function buildAgentEnv(baseEnv, decrypted) {
  const env = {};
  for (const [k, v] of Object.entries(baseEnv)) {
    if (v !== undefined && !STRIPPED_ENV.includes(k)) env[k] = v;
  }
  return Object.assign(env, decrypted);
}
