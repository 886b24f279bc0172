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

// IPv4 addresses a webhook may never reach: this host, the private networks, link-local (cloud metadata at
// 169.254.169.254), CGNAT, multicast and the reserved ranges.
const forbiddenV4 = new BlockList();
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
  forbiddenV4.addSubnet(net, prefix, 'ipv4');

// IPv6 is allowed only as global unicast (2000::/3), less its blocks that are not globally reachable (IANA's
// special-purpose registry): IETF protocol assignments, documentation, SRv6 SIDs. Everything else (loopback,
// unique-local, link-local, multicast, NAT64's local-use 64:ff9b:1::/48...) is outside 2000::/3.
const notGlobalV6 = new BlockList();
for (const [net, prefix] of [
  ['2001::', 23],
  ['2001:db8::', 32],
  ['3fff::', 20],
  ['5f00::', 16],
] as const)
  notGlobalV6.addSubnet(net, prefix, 'ipv6');

/** The 16 bytes of an IPv6 address that isIP() accepted (a trailing dotted quad is its last 4 bytes). */
function v6Bytes(address: string): Uint8Array {
  const bytes = new Uint8Array(16);
  const quad = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  const text = quad ? `${quad[1]}0:0` : address;
  const [head = '', tail] = text.split('::');
  const groups = (s: string) => (s ? s.split(':') : []);
  const all = tail === undefined ? groups(head) : [...groups(head), ...Array<string>(8 - groups(head).length - groups(tail).length).fill('0'), ...groups(tail)];
  all.forEach((g, i) => {
    const v = parseInt(g, 16);
    bytes[2 * i] = v >> 8;
    bytes[2 * i + 1] = v & 255;
  });
  if (quad) bytes.set(quad[2]!.split('.').map(Number), 12);
  return bytes;
}

/** The IPv4 address in 4 bytes at `at` (Teredo stores its client's inverted: `mask` 255). */
const v4At = (b: Uint8Array, at: number, mask = 0) => Array.from(b.subarray(at, at + 4), (x) => x ^ mask).join('.');

/**
 * IPv6 prefixes whose addresses carry an IPv4 address that traffic to them reaches (a host's stack, a NAT64 or a
 * relay delivers it there): such an address is judged by the IPv4 addresses it carries. All are whole bytes long.
 */
const CARRIERS: Array<[net: string, bits: number, carried: (b: Uint8Array) => string[]]> = [
  ['::', 96, (b) => [v4At(b, 12)]], // IPv4-compatible (deprecated; :: and ::1 carry 0.0.0.0/8)
  ['::ffff:0:0', 96, (b) => [v4At(b, 12)]], // IPv4-mapped
  ['::ffff:0:0:0', 96, (b) => [v4At(b, 12)]], // IPv4-translated (SIIT)
  ['64:ff9b::', 96, (b) => [v4At(b, 12)]], // NAT64's well-known prefix (DNS64 gives these for IPv4-only names)
  ['2002::', 16, (b) => [v4At(b, 2)]], // 6to4
  ['2001::', 32, (b) => [v4At(b, 4), v4At(b, 12, 255)]], // Teredo: its server, and its client inverted
];

const carrierPrefixes = CARRIERS.map(([net, bits, carried]) => ({ bytes: v6Bytes(net).subarray(0, bits / 8), carried }));

/**
 * Whether an address is one a webhook may not reach. IPv6: an address carrying IPv4 (mapped, translated, NAT64,
 * 6to4, Teredo) is judged by the IPv4 it carries; any other must be global unicast. A zone (fe80::1%eth0) is
 * link-scoped.
 */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return forbiddenV4.check(address, 'ipv4');
  if (family !== 6 || address.includes('%')) return true;
  const b = v6Bytes(address);
  const carrier = carrierPrefixes.find((c) => c.bytes.every((x, i) => b[i] === x));
  if (carrier) return carrier.carried(b).some((v4) => forbiddenV4.check(v4, 'ipv4'));
  return (b[0]! & 0xe0) !== 0x20 || notGlobalV6.check(address, 'ipv6');
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
