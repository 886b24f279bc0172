import { z } from 'zod';

export const uuid = z.uuid();
/** An ISO 8601 time; documented as RFC 3339 date-time (what toISOString writes), which the contract test checks in every answer. */
export const isoTime = z.string().meta({ format: 'date-time' });
/** Solana wallet address: base58, 32-44 chars. The service decodes it to check it is 32 bytes. */
export const walletAddress = z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/, 'must be a base58 wallet address');
export const instanceId = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{2,49}$/, 'must be 3-50 characters: lowercase letters, digits, hyphens')
  .max(50);
export const tierName = z.enum(['free', 'pro', 'enterprise']);
export type TierName = z.infer<typeof tierName>;

/** Request metadata the gateway forwards for audit records. */
export const requestMeta = z.object({
  ip: z.string().max(100).default(''),
  user_agent: z.string().max(500).default(''),
  request_id: z.string().max(100).default(''),
});
export type RequestMeta = z.infer<typeof requestMeta>;

export const empty = z.object({}).strict();
