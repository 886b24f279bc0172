import { execFile } from 'node:child_process';
import { chmodSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import net from 'node:net';
import { promisify } from 'node:util';
import type { Logger } from '@agenthost/shared';
import type { GatewayConfig } from './config.ts';

const run = promisify(execFile);
/** How often the instance bridge's address is read again (the provisioner makes the network at its start). */
const BRIDGE_POLL_MS = 2000;

export interface Listeners {
  /** Stop taking connections everywhere; resolves once every connection has ended. */
  close(): Promise<void>;
}

/**
 * Where the gateway takes connections besides its own TCP listener (GATEWAY_HOST:GATEWAY_PORT, which `server`
 * listens on first): the instance bridge's address (GATEWAY_INSTANCE_BRIDGE) and the edge's unix socket
 * (GATEWAY_EDGE_SOCKET). Each hands its connections to the one HTTP server, so timeouts, keep-alive and the
 * shutdown's closing of idle connections are the same everywhere.
 */
export async function listenMore(server: Server, config: GatewayConfig, log: Logger): Promise<Listeners> {
  const hand = (socket: net.Socket) => server.emit('connection', socket);
  const extra: net.Server[] = [];
  if (config.GATEWAY_EDGE_SOCKET) {
    const path = config.GATEWAY_EDGE_SOCKET;
    // A gateway killed before it closed its socket leaves the file, and a path in use cannot be listened on.
    rmSync(path, { force: true });
    const edge = net.createServer(hand);
    await listening(edge.listen(path));
    // Group-writable: the directory (deploy/start.sh) lets only the edge's user and the gateway reach it.
    chmodSync(path, 0o660);
    extra.push(edge);
  }
  let bridge: BridgeListeners | undefined;
  if (config.GATEWAY_INSTANCE_BRIDGE) bridge = new BridgeListeners(config.GATEWAY_INSTANCE_BRIDGE, config.GATEWAY_PORT, hand, log);
  await bridge?.follow();
  return {
    async close() {
      bridge?.stop();
      await Promise.all([server, ...extra, ...(bridge?.servers() ?? [])].map((s) => new Promise((r) => s.close(r))));
    },
  };
}

/** A listener on each IPv4 address of the instance bridge, kept in step with the interface's addresses. */
class BridgeListeners {
  private readonly byAddress = new Map<string, net.Server>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failure: string | undefined;
  private readonly iface: string;
  private readonly port: number;
  private readonly hand: (socket: net.Socket) => void;
  private readonly log: Logger;

  constructor(iface: string, port: number, hand: (socket: net.Socket) => void, log: Logger) {
    this.iface = iface;
    this.port = port;
    this.hand = hand;
    this.log = log;
  }

  servers(): net.Server[] {
    return [...this.byAddress.values()];
  }

  async follow(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.sync(await addressesOf(this.iface));
      this.failure = undefined;
    } catch (err) {
      // Once per kind of failure, not every poll.
      if (this.failure !== String(err)) this.log.warn({ err, bridge: this.iface }, 'could not listen on the instance bridge; trying again');
      this.failure = String(err);
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.follow(), BRIDGE_POLL_MS);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async sync(addresses: string[]): Promise<void> {
    for (const [address, s] of this.byAddress) {
      if (addresses.includes(address)) continue;
      this.byAddress.delete(address);
      s.close();
      this.log.info({ bridge: this.iface, address }, 'instance bridge address gone: no longer listening there');
    }
    for (const address of addresses) {
      if (this.byAddress.has(address)) continue;
      const s = net.createServer(this.hand);
      await listening(s.listen(this.port, address));
      this.byAddress.set(address, s);
      this.log.info({ bridge: this.iface, address, port: this.port }, 'listening on the instance bridge');
    }
  }
}

/** The interface's IPv4 addresses (none while it does not exist). Read with `ip`: Node lists only interfaces that are up, and a bridge with no container attached is down. */
async function addressesOf(iface: string): Promise<string[]> {
  const { stdout } = await run('ip', ['-j', '-4', 'addr', 'show', 'dev', iface]).catch((err: { stderr?: string }) => {
    if (/does not exist/.test(err.stderr ?? '')) return { stdout: '[]' };
    throw err;
  });
  const links = JSON.parse(stdout || '[]') as { addr_info?: { local?: string }[] }[];
  return links.flatMap((l) => (l.addr_info ?? []).map((a) => a.local).filter((a): a is string => !!a));
}

function listening(server: net.Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
}
