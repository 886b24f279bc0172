import http from 'node:http';

export interface AddressedReply {
  status: number;
  retryAfter: string | undefined;
  body: Record<string, unknown>;
}

/**
 * One JSON request as a client at the address `from` sends it (any 127.0.0.0/8 address reaches a local server),
 * for the per-address limits. `agent`: kept-alive connections (a flooding client holds them); none by default.
 */
export function requestFrom(
  url: string,
  o: { from: string; method: 'GET' | 'POST'; body?: unknown; headers?: Record<string, string>; agent?: http.Agent },
): Promise<AddressedReply> {
  const data = o.body === undefined ? undefined : JSON.stringify(o.body);
  const headers = { ...(data ? { 'content-type': 'application/json' } : {}), ...o.headers };
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: o.method, headers, ...(o.agent ? { agent: o.agent } : { agent: false, localAddress: o.from }) }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body: text ? JSON.parse(text) : {} }),
      );
    });
    req.on('error', reject);
    req.end(data);
  });
}
