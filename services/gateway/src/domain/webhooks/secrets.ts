import { randomBytes } from 'node:crypto';
import { openAtRest, sealAtRest } from '@agenthost/shared';

/** A Standard Webhooks signing secret: whsec_ and 24 random bytes in base64. */
export const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

/** Sealed with the gateway's data key and the endpoint id as AAD, so a sealed secret opens only for its own endpoint. */
export const sealSecret = (key: Buffer, secret: string, webhookId: string): string => sealAtRest(key, secret, webhookId);

export const openSecret = (key: Buffer, sealed: string, webhookId: string): string => openAtRest(key, sealed, webhookId);
