import { request } from 'node:https';
import type { LookupFunction } from 'node:net';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { webhookHeaders } from '@agenthost/shared';
import type { Target } from './target.ts';

export interface Attempt {
  /** The receiver's status code, when it answered. */
  status?: number;
  /** Why there is no status (connection refused, timeout, TLS). */
  error?: string;
}

/** The trust store for receivers: the system's CAs, plus WEBHOOK_CA_FILE (a private receiver's CA), never "verify off". */
export function receiverCas(caFile: string | undefined): string[] {
  return caFile ? [...rootCertificates, readFileSync(caFile, 'utf8')] : [...rootCertificates];
}

/**
 * POSTs one signed body to a checked target. The connection goes to the address that was checked (the lookup is
 * pinned), so DNS cannot swap in another address between the check and the connect; redirects are not followed.
 */
export function send(
  target: Target,
  msgId: string,
  body: string,
  signature: string,
  at: Date,
  opts: { ca: string[]; timeoutMs: number; signal?: AbortSignal },
): Promise<Attempt> {
  const pinned: LookupFunction = (_host, options, cb) => {
    if ((options as { all?: boolean }).all)
      (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address: target.address, family: target.family }]);
    else cb(null, target.address, target.family);
  };
  return new Promise<Attempt>((resolve) => {
    const req = request(
      target.url,
      {
        method: 'POST',
        lookup: pinned,
        ca: opts.ca,
        timeout: opts.timeoutMs,
        ...(opts.signal ? { signal: opts.signal } : {}),
        headers: { ...webhookHeaders(msgId, at, signature), 'content-length': Buffer.byteLength(body), 'user-agent': 'agenthost-webhooks/1' },
      },
      (res) => {
        res.resume(); // the answer's body is not needed: drained, not kept
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        res.on('error', () => resolve({ status: res.statusCode ?? 0 }));
      },
    );
    const deadline = setTimeout(() => req.destroy(new Error('timeout')), opts.timeoutMs);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: (err.code ?? err.message).slice(0, 200) }));
    req.on('close', () => clearTimeout(deadline));
    req.end(body);
  });
}
