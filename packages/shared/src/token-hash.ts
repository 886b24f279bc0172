import { createHash } from 'node:crypto';

/**
 * Hex SHA-256 of an instance's access token: all the provisioner keeps of it (the token is shown once), and what the
 * edge compares a presented token with to know the instance's owner. One definition, so the two always agree.
 */
export const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');
