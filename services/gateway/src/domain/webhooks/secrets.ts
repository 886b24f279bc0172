import { randomBytes } from 'node:crypto';
import { openText, sealText } from '../data-key.ts';

/** A Standard Webhooks signing secret: whsec_ and 24 random bytes in base64. */
export const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

/** Sealed with the gateway's data key and the endpoint id as AAD, so a sealed secret opens only for its own endpoint. */
export const sealSecret = (key: Buffer, secret: string, webhookId: string): string => sealText(key, secret, webhookId);

export const openSecret = (key: Buffer, sealed: string, webhookId: string): string => openText(key, sealed, webhookId);
