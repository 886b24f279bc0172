import { createHash, randomBytes } from 'node:crypto';

/** Only the hash of an instance's gateway access token is stored; the token itself is shown once. */
export const hashToken = (t: string) => createHash('sha256').update(t).digest('hex');
export const newToken = () => randomBytes(32).toString('base64url');
export const newInstanceId = () => `inst-${randomBytes(10).toString('hex')}`;
