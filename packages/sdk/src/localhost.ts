import type { LookupAddress, LookupOptions } from 'node:dns';

/**
 * RFC 6761 §6.3: `localhost` and every name under `.localhost` are the loopback. Browsers and curl resolve them so
 * themselves; glibc's resolver (and so Node's dns.lookup) has no such rule and answers ENOTFOUND for
 * `agenthost.localhost`, the default deployment's address.
 */
export const isLoopbackName = (host: string): boolean => /^(?:[^/]+\.)?localhost\.?$/i.test(host);

/** Whether the SDK's own fetch is needed for this base URL: in Node, for a .localhost host or a CA of the caller's. */
export function needsNodeFetch(baseUrl: string, ca: string | undefined): boolean {
  if (typeof process === 'undefined' || !process.versions?.node) return false;
  if (ca !== undefined) return true;
  try {
    return isLoopbackName(new URL(baseUrl).hostname);
  } catch {
    return false; // a relative base URL (the dashboard's /api): the page's own origin
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

// Variables, so a browser bundler leaves the imports alone: this code only runs in Node.
const UNDICI = 'undici';
const DNS = 'node:dns';

/**
 * A fetch for Node whose connections resolve `*.localhost` to the loopback (127.0.0.1, or ::1 when only IPv6 is
 * asked) and every other name as usual. Only the address changes: the TLS handshake still names the host (SNI) and
 * checks the certificate against it. `ca` (PEM) replaces the trusted roots, e.g. with the local edge's CA;
 * NODE_EXTRA_CA_CERTS adds to them instead.
 */
export async function nodeFetch(ca: string | undefined): Promise<(request: Request) => Promise<Response>> {
  const dns = (await import(/* @vite-ignore */ DNS)) as typeof import('node:dns');
  const undici = (await import(/* @vite-ignore */ UNDICI)) as typeof import('undici');
  const lookup = (hostname: string, options: LookupOptions, callback: LookupCallback) => {
    if (!isLoopbackName(hostname)) return void dns.lookup(hostname, { ...options, all: Boolean(options.all) }, callback as never);
    const address: LookupAddress = options.family === 6 ? { address: '::1', family: 6 } : { address: '127.0.0.1', family: 4 };
    if (options.all) callback(null, [address]);
    else callback(null, address.address, address.family);
  };
  const dispatcher = new undici.Agent({ connect: { lookup, ...(ca === undefined ? {} : { ca }) } });
  // openapi-fetch hands over a Request of the platform's fetch; undici's own fetch takes its parts.
  return async (request: Request) =>
    (await undici.fetch(request.url, {
      method: request.method,
      headers: [...request.headers],
      // The platform's ReadableStream, typed apart from undici's own under a browser's lib (the dashboard's build).
      ...(request.body ? { body: request.body as never, duplex: 'half' as const } : {}),
      signal: request.signal,
      redirect: request.redirect,
      dispatcher,
    })) as unknown as Response;
}
