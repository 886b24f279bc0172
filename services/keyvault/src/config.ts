import { z } from 'zod';
import { baseConfig, configInt, SealOpener } from '@agenthost/shared';
import { decodeMasterKey, Keyring, KID_RE } from './domain/crypto.ts';

// Messages never echo a key: only what is wrong with it.
const masterKey = z.string({ error: 'is required: base64 of 32 random bytes (e.g. `openssl rand -base64 32`)' }).superRefine((v, ctx) => {
  const r = decodeMasterKey(v);
  if ('problem' in r) ctx.addIssue({ code: 'custom', message: r.problem });
});

const previousKeys = z
  .string()
  .default('{}')
  .superRefine((v, ctx) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(v);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object {"<key id>":"<base64 key>"}; it is not valid JSON' });
      return;
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object {"<key id>":"<base64 key>"}' });
      return;
    }
    for (const [kid, b64] of Object.entries(parsed)) {
      if (!KID_RE.test(kid)) ctx.addIssue({ code: 'custom', message: `key id "${kid.slice(0, 32)}" must match ${KID_RE}` });
      const r = typeof b64 === 'string' ? decodeMasterKey(b64) : { problem: 'must be a base64 string' };
      if ('problem' in r) ctx.addIssue({ code: 'custom', message: `key "${kid.slice(0, 32)}" ${r.problem}` });
    }
  });

// Each setting's description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
export const keyvaultConfig = baseConfig
  .extend({
    MASTER_KEY_ENCRYPTION: masterKey.describe(
      'The current master key: base64 of 32 bytes. The service refuses to start without a valid one; deploy/start.sh generates and keeps one.',
    ),
    MASTER_KEY_ID: z
      .string()
      .regex(KID_RE, 'must be 1-32 letters, digits, dot, underscore or hyphen')
      .default('k1')
      .describe('Id of the current master key, recorded in every ciphertext it seals.'),
    MASTER_KEYS_PREVIOUS: previousKeys.meta({
      accepts: 'JSON',
      description: 'Older master keys that can still open what they sealed, for rotation: `{"<id>":"<base64>"}` (docs/decisions/0036-keys.md).',
    }),
    INSTANCE_AUTH_MAX_FAILURES_PER_IP: configInt(20).describe(
      'Instance authentication failures allowed per source IP in one `INSTANCE_AUTH_WINDOW_SECONDS`, then 429.',
    ),
    INSTANCE_AUTH_MAX_FAILURES_PER_INSTANCE: configInt(10).describe(
      'Instance authentication failures allowed per instance id in one `INSTANCE_AUTH_WINDOW_SECONDS`, then 429.',
    ),
    INSTANCE_AUTH_WINDOW_SECONDS: configInt(300).describe('The window of the instance authentication limits.'),
    MAX_KEYS_PER_INSTANCE: configInt(100).describe('Most keys one instance may hold.'),
    KEYVAULT_SEAL_PRIVATE_KEY: z
      .string({ error: 'is required: an X25519 private key (PKCS#8 PEM)' })
      .superRefine((v, ctx) => {
        try {
          new SealOpener(v);
        } catch {
          // Never quotes the value: it is a private key.
          ctx.addIssue({ code: 'custom', message: 'must be an X25519 private key (PKCS#8 PEM)' });
        }
      })
      .describe(
        "keyvault's X25519 private key (PKCS#8 PEM): opens the provider keys the gateway seals to its public key. deploy/start.sh makes " +
          "`$AGENTHOST_STATE/secrets/keyvault-seal.pem`, readable by keyvault's user only.",
      ),
  })
  .superRefine((c, ctx) => {
    // Runs even when a field failed; the field's own check already reported a bad JSON.
    const prev = parsePrevious(c.MASTER_KEYS_PREVIOUS);
    if (prev && Object.hasOwn(prev, c.MASTER_KEY_ID)) {
      ctx.addIssue({ code: 'custom', path: ['MASTER_KEYS_PREVIOUS'], message: `must not contain the current key id "${c.MASTER_KEY_ID}"` });
    }
  });

/** The parsed MASTER_KEYS_PREVIOUS object, or undefined (never throws: a JSON error message could quote a key). */
function parsePrevious(text: unknown): Record<string, unknown> | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export type KeyvaultConfig = z.output<typeof keyvaultConfig>;

/** The keyring a valid configuration describes. */
export function keyringFrom(config: Pick<KeyvaultConfig, 'MASTER_KEY_ENCRYPTION' | 'MASTER_KEY_ID' | 'MASTER_KEYS_PREVIOUS'>): Keyring {
  const keys = new Map<string, Buffer>();
  const decode = (b64: string): Buffer => {
    const r = decodeMasterKey(b64);
    if ('problem' in r) throw new Error('invalid master key');
    return r.key;
  };
  for (const [kid, b64] of Object.entries(parsePrevious(config.MASTER_KEYS_PREVIOUS) ?? {})) keys.set(kid, decode(String(b64)));
  keys.set(config.MASTER_KEY_ID, decode(config.MASTER_KEY_ENCRYPTION));
  return new Keyring(config.MASTER_KEY_ID, keys);
}
