import { openAtRest, sealAtRest } from '@agenthost/shared';

/** Sealed with the gateway's data key and the endpoint id as AAD, so a sealed secret opens only for its own endpoint. */
export const sealSecret = (key: Buffer, secret: string, webhookId: string): string => sealAtRest(key, secret, webhookId);

export const openSecret = (key: Buffer, sealed: string, webhookId: string): string => openAtRest(key, sealed, webhookId);
