import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/*
 * Host firewall of the instance network.
 *
 * Why: the bridge's inter-container switch is off (enable_icc=false), so instances cannot talk to
 * each other on it, and Postgres/NATS listen on 127.0.0.1 only. That is not enough on its own:
 *   - traffic from a container to the HOST (the bridge gateway address, or any other address of the
 *     host) is local delivery, decided by the INPUT chain, which Docker leaves open: anything that
 *     listens on 0.0.0.0 on the host (the gateway, but also a dev database, an SSH daemon, a metrics
 *     port) would be reachable from every tenant;
 *   - traffic to other containers on OTHER Docker networks, to cloud metadata endpoints
 *     (169.254.169.254), or to the private network the host sits in is routed (FORWARD), and only
 *     partially covered by Docker's isolation chains.
 * So, for packets entering from the instance bridge:
 *   INPUT:       accept replies, accept TCP to the gateway port (the only host service an instance
 *                needs: it fetches its keys there), accept DNS to the configured resolvers, drop the rest;
 *   DOCKER-USER: (Docker's hook in FORWARD, evaluated before its own rules) let replies and DNS to
 *                the configured resolvers through, drop everything addressed to private, shared,
 *                link-local, multicast and special-purpose ranges and to the subnets the host is
 *                connected to (its neighbours). Outbound internet (the LLM providers) stays allowed.
 * Rules carry the comment "agenthost:<network>", are checked with -C before inserting (idempotent,
 * re-checked by every reconcile pass, so a flushed chain heals itself) and can be removed by tag.
 */

/** Private, shared, link-local, multicast and reserved ranges, and the special-purpose ones (RFC 6890). */
export const PRIVATE_RANGES = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
];

export interface FirewallSpec {
  bridge: string;
  gatewayPort: number;
  tag: string;
  dnsServers: string[];
  /** The host's own connected subnets (its neighbours), blocked like the private ranges. */
  hostSubnets?: string[];
}

/** Whether IPv4 CIDR `inner` lies inside `outer` (a host subnet inside a private range needs no rule of its own). */
function within(inner: string, outer: string): boolean {
  const parse = (cidr: string) => {
    const [ip, bits] = cidr.split('/') as [string, string];
    return { n: ip.split('.').reduce((acc, o) => (acc << 8) + Number(o), 0) >>> 0, prefix: Number(bits) };
  };
  const i = parse(inner);
  const o = parse(outer);
  if (i.prefix < o.prefix) return false;
  const mask = o.prefix === 0 ? 0 : (~0 << (32 - o.prefix)) >>> 0;
  return (i.n & mask) >>> 0 === (o.n & mask) >>> 0;
}

/** The IPv4 subnets the host is connected to (loopback excluded), as network/prefix CIDRs. */
export function hostSubnets(interfaces = os.networkInterfaces()): string[] {
  const out = new Set<string>();
  for (const addrs of Object.values(interfaces)) {
    for (const a of addrs ?? []) {
      if (a.family !== 'IPv4' || a.internal || !a.cidr) continue;
      const [ip, bits] = a.cidr.split('/') as [string, string];
      const prefix = Number(bits);
      const n = ip.split('.').reduce((acc, o) => (acc << 8) + Number(o), 0) >>> 0;
      const net = prefix === 0 ? 0 : (n & (~0 << (32 - prefix))) >>> 0;
      out.add(`${[24, 16, 8, 0].map((sh) => (net >>> sh) & 255).join('.')}/${prefix}`);
    }
  }
  return [...out].sort();
}

/** The tag of a network's rules, and their removal by it: in packages/shared (instance-host.ts), which tests read too. */
export { firewallTag, removeFirewall } from '@agenthost/shared';

/** IPv4 name servers of the host (Docker's embedded DNS forwards to these from the container). */
export function hostDnsServers(resolvConf = '/etc/resolv.conf'): string[] {
  try {
    return readFileSync(resolvConf, 'utf8')
      .split('\n')
      .map((l) => /^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/.exec(l)?.[1])
      .filter((ip): ip is string => !!ip && !ip.startsWith('127.'));
  } catch {
    return [];
  }
}

/** The rules, in evaluation order, per chain. */
export function firewallRules(s: FirewallSpec): { chain: string; rule: string[] }[] {
  const c = ['-m', 'comment', '--comment', s.tag];
  const i = ['-i', s.bridge];
  const dns = (target: string) =>
    s.dnsServers.flatMap((ns) => ['udp', 'tcp'].map((proto) => [...i, '-d', `${ns}/32`, '-p', proto, '-m', proto, '--dport', '53', ...c, '-j', target]));
  return [
    { chain: 'INPUT', rule: [...i, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', ...c, '-j', 'ACCEPT'] },
    { chain: 'INPUT', rule: [...i, '-p', 'tcp', '-m', 'tcp', '--dport', String(s.gatewayPort), ...c, '-j', 'ACCEPT'] },
    ...dns('ACCEPT').map((rule) => ({ chain: 'INPUT', rule })),
    { chain: 'INPUT', rule: [...i, ...c, '-j', 'DROP'] },
    { chain: 'DOCKER-USER', rule: [...i, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', ...c, '-j', 'RETURN'] },
    ...dns('RETURN').map((rule) => ({ chain: 'DOCKER-USER', rule })),
    ...[...PRIVATE_RANGES, ...(s.hostSubnets ?? []).filter((r) => !PRIVATE_RANGES.some((p) => within(r, p)))].map((range) => ({
      chain: 'DOCKER-USER',
      rule: [...i, '-d', range, ...c, '-j', 'DROP'],
    })),
  ];
}

const iptables = (args: string[]) => exec('iptables', ['-w', '5', ...args], { timeout: 15_000 });

/** A rule as an order-independent key (iptables -S prints -d before -i, etc.). */
const ruleKey = (tokens: string[]) => [...tokens].sort().join(' ');

async function listed(chain: string): Promise<Set<string>> {
  try {
    const { stdout } = await iptables(['-S', chain]);
    return new Set(
      stdout
        .split('\n')
        .filter((l) => l.startsWith(`-A ${chain} `))
        .map((l) => ruleKey(l.replace(/"/g, '').split(/\s+/).filter(Boolean).slice(2))),
    );
  } catch {
    return new Set();
  }
}

/** The rules of the spec that are not in the host's tables now (for the doctor). */
export async function missingFirewallRules(s: FirewallSpec): Promise<{ chain: string; rule: string[] }[]> {
  const have = new Map<string, Set<string>>();
  for (const chain of ['INPUT', 'DOCKER-USER']) have.set(chain, await listed(chain));
  return firewallRules(s).filter((r) => !have.get(r.chain)!.has(ruleKey(r.rule)));
}

/**
 * Make sure the rules are in place (one `iptables -S` per chain, so the check is cheap enough for
 * every reconcile pass). When any is missing, the whole ordered set is inserted at the top of the
 * chain (older partial copies below it can no longer change a decision). Returns true when something
 * was inserted.
 */
export async function applyFirewall(s: FirewallSpec): Promise<boolean> {
  return applyRules(firewallRules(s));
}

/** applyFirewall's way for any ordered set of rules (the swarm's published-port rules too: swarm/node-firewall.ts). */
export async function applyRules(rules: { chain: string; rule: string[] }[]): Promise<boolean> {
  const byChain = new Map<string, string[][]>();
  for (const r of rules) byChain.set(r.chain, [...(byChain.get(r.chain) ?? []), r.rule]);
  let changed = false;
  for (const [chain, list] of byChain) {
    const have = await listed(chain);
    if (list.every((r) => have.has(ruleKey(r)))) continue;
    if (chain === 'DOCKER-USER') await iptables(['-N', 'DOCKER-USER']).catch(() => {});
    // Insert in reverse at position 1 so the set ends up in order at the top of the chain.
    for (const r of [...list].reverse()) await iptables(['-I', chain, '1', ...r]);
    changed = true;
  }
  return changed;
}
