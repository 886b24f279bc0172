import { randomBytes } from 'node:crypto';
import type { NatsConnection } from 'nats';
import pg from 'pg';
import { contracts, request } from '@agenthost/shared';
import { apiClient, recordSecret, type ApiResponse, type Stack } from '@agenthost/testkit';
import { waitFor as baseWaitFor } from '@agenthost/testkit';

export const kv = contracts.keyvault;

/** A plaintext key value that the log scan will look for. */
export function secretValue(label = 'sk'): string {
  const v = `${label}-${randomBytes(24).toString('base64url')}`;
  recordSecret(v);
  return v;
}

export const newInstanceId = (): string => `kv-${randomBytes(6).toString('hex')}`;

export interface Credentials {
  instance_id: string;
  instance_secret: string;
  instance_key: string;
  key_id: string;
}

/** What the provisioner does at every container (re)create. */
export async function issue(nc: NatsConnection, user_id: string, instance_id = newInstanceId()): Promise<Credentials> {
  const c = await request(nc, kv.issueCredentials, { user_id, instance_id });
  recordSecret(c.instance_secret);
  recordSecret(c.instance_key);
  return { instance_id, ...c };
}

/** The instance's call, from a given source address (the gateway trusts X-Forwarded-For from loopback only). */
export function retrieve(stack: Stack, id: string, secret: string, ip: string, userAgent = 'agenthost-bootstrap/1'): Promise<ApiResponse> {
  return apiClient(stack.baseUrl).get('/keys/retrieve', { 'x-instance-id': id, 'x-instance-secret': secret, 'x-forwarded-for': ip, 'user-agent': userAgent });
}

let ipCounter = 0;
/** A distinct source address per use, so rate limit buckets of separate tests never meet. */
export const nextIp = (): string => {
  ipCounter++;
  return `10.${(process.pid >> 8) & 255}.${(ipCounter >> 8) & 255}.${ipCounter & 255}`;
};

/** A direct look at keyvault's tables (what a database dump would show). */
export async function keyvaultDb(stack: Stack): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: stack.db.url, options: '-c search_path=keyvault' });
  await c.connect();
  return c;
}

export const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> => baseWaitFor(what, fn, timeoutMs, 200);
