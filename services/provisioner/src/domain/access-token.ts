import { randomBytes } from 'node:crypto';

// An instance's gateway access token is shown once; only its hash (hashToken, @agenthost/shared) is stored.
export const newToken = () => randomBytes(32).toString('base64url');
export const newInstanceId = () => `inst-${randomBytes(10).toString('hex')}`;
