import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { AppError } from '@agenthost/shared';

/** Where one delivery connects: the URL, and the address it was checked at (the connection is pinned to it). */
export interface Target {
  url: URL;
  address: string;
  family: 4 | 6;
}

export type Lookup = (host: string) => Promise<Array<{ address: string; family: number }>>;
const systemLookup: Lookup = (host) => dnsLookup(host, { all: true, verbatim: true });

// Addresses a webhook may never reach: this host, the private networks, link-local (cloud metadata at
// 169.254.169.254), CGNAT, unique-local v6, multicast and the reserved ranges.
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['100::', 64],
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

/** Whether an address is one a webhook may not reach (v4 embedded in v6 is judged as v4). */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family !== 6) return true;
  const lower = address.toLowerCase();
  // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) reach the v4 address inside.
  const embedded = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower)?.[1] ?? mappedHex(lower);
  if (embedded) return blocked.check(embedded, 'ipv4');
  return blocked.check(address, 'ipv6');
}

/** ::ffff:7f00:1 written in hex: the v4 address it maps. */
function mappedHex(v6: string): string | undefined {
  const m = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (!m) return undefined;
  const hi = parseInt(m[1]!, 16);
  const lo = parseInt(m[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

const refuse = (why: string) => new AppError('WEBHOOK_URL_REFUSED', `The webhook URL is refused: ${why}`);

/**
 * Checks a webhook URL and resolves it to the address to connect to: https only, no credentials in it, and every
 * address of the host public (a name with one private address among public ones is refused: the client picks any).
 * Called when an endpoint is created and again before each attempt, since a name may resolve elsewhere later.
 * Hosts in `allow` (WEBHOOK_ALLOW_HOSTS) skip the address check only.
 */
export async function resolveTarget(raw: string, allow: readonly string[], lookup: Lookup = systemLookup): Promise<Target> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse('not a valid URL');
  }
  if (url.protocol !== 'https:') throw refuse('only https is allowed');
  if (url.username || url.password) throw refuse('credentials in the URL are not allowed');
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (!host) throw refuse('no host');
  const allowed = allow.includes(host);
  let addresses: Array<{ address: string; family: number }>;
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host);
    } catch {
      throw refuse(`the host ${host} does not resolve`);
    }
  }
  if (addresses.length === 0) throw refuse(`the host ${host} does not resolve`);
  if (!allowed && addresses.some((a) => isForbiddenAddress(a.address))) throw refuse('the host is or resolves to a private, loopback or link-local address');
  const first = addresses[0]!;
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}
