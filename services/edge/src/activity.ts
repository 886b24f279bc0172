import { readFile } from 'node:fs/promises';
import type { Logger } from '@agenthost/shared';

/**
 * Which instances had their owner's traffic through this edge, for idle sleep (anyone else's counts for nothing:
 * owner.ts). Two signs: an owner's request asked the keeper for the instance's route (every HTTP request and every
 * WebSocket opening does), or the connection that request came on is still open (a WebSocket or a long answer in
 * progress: they ask only once). The connections are the clients' to this edge, read from /proc/net/tcp{,6} of this
 * network namespace (Caddy's: the keeper runs beside it on the host or in its task), by the address and port Caddy
 * names for each request: a connection from the edge to an agent may carry anyone's request (Caddy pools them), a
 * client's connection only its own.
 */
export class Activity {
  private seen = new Set<string>();
  /** "<instance id> <client address:port>" of the owners' requests whose connection may still be open. */
  private held = new Set<string>();
  /** When each instance last had its owner's request here (pruned at each report). */
  private last = new Map<string, number>();
  private readonly deps: {
    /** The port the edge's clients connect to (EDGE_HTTPS_PORT). */
    port: number;
    report: (ids: string[]) => Promise<void>;
    log: Logger;
    /** The connection tables to read (tests point them elsewhere). */
    tables?: string[];
  };

  constructor(deps: Activity['deps']) {
    this.deps = deps;
  }

  /** An owner's request to the instance, from `client` (address:port, as the edge sees the connection). */
  touch(instanceId: string, client?: string): void {
    this.seen.add(instanceId);
    this.last.set(instanceId, Date.now());
    if (client) this.held.add(`${instanceId} ${client}`);
  }

  /** Whether its owner's request came within the last `ms` (keeper.ts wakes an instance that fell asleep under one). */
  usedWithin(instanceId: string, ms: number): boolean {
    return Date.now() - (this.last.get(instanceId) ?? 0) <= ms;
  }

  /** Report what was seen since the last report, and the instances with an owner's connection open now. Kept on failure. */
  async flush(): Promise<void> {
    const ids = this.seen;
    this.seen = new Set();
    const now = Date.now();
    for (const [id, at] of this.last) if (now - at > 60_000) this.last.delete(id);
    try {
      const open = await establishedRemotes(this.deps.tables, this.deps.port);
      for (const entry of this.held) {
        const [id, client] = entry.split(' ') as [string, string];
        if (open.has(client)) ids.add(id);
        else this.held.delete(entry);
      }
      if (ids.size > 0) await this.deps.report([...ids]);
    } catch (err) {
      for (const id of ids) this.seen.add(id);
      this.deps.log.warn({ err: (err as Error).message, instances: ids.size }, 'instance activity not reported; kept for the next report');
    }
  }
}

const ESTABLISHED = '01';

/** The remote "host:port" of every established TCP connection ([v6]:port for IPv6; v4-mapped as v4), or of those to `localPort`. */
export async function establishedRemotes(tables = ['/proc/net/tcp', '/proc/net/tcp6'], localPort?: number): Promise<Set<string>> {
  const out = new Set<string>();
  for (const table of tables) {
    const text = await readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] !== ESTABLISHED || !cols[2] || !cols[1]) continue;
      if (localPort !== undefined && Number.parseInt(cols[1].split(':')[1] ?? '', 16) !== localPort) continue;
      const [hex, portHex] = cols[2].split(':');
      if (!hex || !portHex) continue;
      const host = hex.length === 8 ? v4(hex) : v6(hex);
      if (host) out.add(`${host}:${Number.parseInt(portHex, 16)}`);
    }
  }
  return out;
}

/** The kernel prints each 32-bit word of an address in host byte order (little-endian here). */
const wordBytes = (word: string): number[] => [6, 4, 2, 0].map((i) => Number.parseInt(word.slice(i, i + 2), 16));

const v4 = (hex: string): string => wordBytes(hex).join('.');

function v6(hex: string): string | undefined {
  if (hex.length !== 32) return undefined;
  const bytes = [0, 8, 16, 24].flatMap((i) => wordBytes(hex.slice(i, i + 8)));
  // ::ffff:a.b.c.d is the IPv4 address a.b.c.d (a dual-stack socket).
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return `[${compress(groups)}]`;
}

/** RFC 5952 text of eight groups: the longest run of zero groups (two or more) becomes "::". */
function compress(groups: string[]): string {
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  if (best < 0) return groups.join(':');
  return `${groups.slice(0, best).join(':')}::${groups.slice(best + bestLen).join(':')}`;
}
