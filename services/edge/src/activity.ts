import { readFile } from 'node:fs/promises';
import type { Logger } from '@agenthost/shared';

/**
 * Which instances had traffic through this edge, for idle sleep. Two signs: a request asked the keeper for the
 * instance's route (every HTTP request and every WebSocket opening does), or a TCP connection from this edge to the
 * instance's agent is established now (a WebSocket or a long answer in progress: they ask only once). Caddy closes idle
 * connections to agents after 5 s (caddy-config.ts), so an open one means traffic. The connections are read from
 * /proc/net/tcp{,6} of this network namespace (Caddy's: the keeper runs beside it on the host or in its task).
 */
export class Activity {
  private seen = new Set<string>();
  private readonly d: {
    /** upstream "host:port" → instance id, of the instances that run. */
    upstreams: () => Map<string, string>;
    report: (ids: string[]) => Promise<void>;
    log: Logger;
    /** The connection tables to read (tests point them elsewhere). */
    tables?: string[];
  };

  constructor(deps: Activity['d']) {
    this.d = deps;
  }

  touch(instanceId: string): void {
    this.seen.add(instanceId);
  }

  /** Report what was seen since the last report, and the instances with a connection open now. Kept on failure. */
  async flush(): Promise<void> {
    const ids = this.seen;
    this.seen = new Set();
    try {
      const upstreams = this.d.upstreams();
      for (const remote of await establishedRemotes(this.d.tables)) {
        const id = upstreams.get(remote);
        if (id) ids.add(id);
      }
      if (ids.size > 0) await this.d.report([...ids]);
    } catch (err) {
      for (const id of ids) this.seen.add(id);
      this.d.log.warn({ err: (err as Error).message, instances: ids.size }, 'instance activity not reported; kept for the next report');
    }
  }
}

const ESTABLISHED = '01';

/** The remote "host:port" of every established TCP connection ([v6]:port for IPv6; v4-mapped as v4). */
export async function establishedRemotes(tables = ['/proc/net/tcp', '/proc/net/tcp6']): Promise<Set<string>> {
  const out = new Set<string>();
  for (const table of tables) {
    const text = await readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] !== ESTABLISHED || !cols[2]) continue;
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
