import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { ensureNatsTls } from '@agenthost/shared';

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * A CA and a certificate for localhost, 127.0.0.1 and `hosts` (vm resolves to 127.0.0.1 here), made fresh for this
 * suite by the same openssl recipe that makes the NATS certificates.
 */
export function receiverTls(hosts: string[]): { caFile: string; cert: string; key: string } {
  const tls = ensureNatsTls(path.join(mkdtempSync(path.join(os.tmpdir(), 'agenthost-webhook-tls-')), 'tls'), hosts);
  return { caFile: tls.ca, cert: readFileSync(tls.cert, 'utf8'), key: readFileSync(tls.key, 'utf8') };
}

/**
 * An https webhook receiver: records every request, and answers with the next status queued for its path (200 when
 * none is queued).
 */
export async function startReceiver(port: number, tls: { cert: string; key: string }) {
  const received: Received[] = [];
  const answers = new Map<string, number[]>();
  const waiters = new Set<() => void>();
  const server: Server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const p = req.url ?? '/';
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      received.push({ path: p, headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = answers.get(p)?.shift() ?? 200;
      res.end('ok');
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    received,
    /** The next requests to `path` are answered with these statuses, in order. */
    answer(p: string, ...statuses: number[]) {
      answers.set(p, [...(answers.get(p) ?? []), ...statuses]);
    },
    /** Resolves once `pick` finds what it waits for among the requests received so far or later ones. */
    async until<T>(pick: (all: Received[]) => T | undefined, timeoutMs = 60_000): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = pick(received);
        if (found !== undefined) return found;
        if (Date.now() > deadline) throw new Error(`receiver: not received in ${timeoutMs} ms; got ${received.map((r) => r.path).join(', ')}`);
        await new Promise<void>((resolve) => {
          const done = () => {
            waiters.delete(done);
            clearTimeout(t);
            resolve();
          };
          const t = setTimeout(done, 1000);
          waiters.add(done);
        });
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
