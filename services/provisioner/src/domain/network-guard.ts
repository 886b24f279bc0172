import { AppError, type Logger } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { applyFirewall, firewallTag, hostDnsServers, hostSubnets } from '../docker/firewall.ts';
import { ensureNetwork, type InstanceNetwork } from '../docker/network.ts';

/**
 * Keeps the instance network and its host firewall in place (at start and on every reconcile pass)
 * and knows where instances reach the gateway. No container is created before both are in place.
 */
export class NetworkGuard {
  private readonly config: ProvisionerConfig;
  private readonly engine: DockerEngine;
  private readonly log: Logger;
  private readonly scope: string;
  private net: InstanceNetwork | undefined;

  constructor(deps: { config: ProvisionerConfig; engine: DockerEngine; log: Logger; scope: string }) {
    this.config = deps.config;
    this.engine = deps.engine;
    this.log = deps.log;
    this.scope = deps.scope;
  }

  get network(): InstanceNetwork | undefined {
    return this.net;
  }

  async ensure(): Promise<InstanceNetwork> {
    const net = await ensureNetwork(this.engine, this.config.INSTANCE_NETWORK, this.scope);
    if (this.config.FIREWALL === 'enforce') {
      const changed = await applyFirewall({
        bridge: net.bridge,
        gatewayPort: this.config.GATEWAY_PORT,
        tag: firewallTag(this.config.INSTANCE_NETWORK),
        dnsServers: hostDnsServers(),
        // Read at every pass: an interface that appears later is blocked at the next reconcile.
        hostSubnets: hostSubnets(),
      });
      if (changed) this.log.info({ network: net.name, bridge: net.bridge, gateway_port: this.config.GATEWAY_PORT }, 'instance firewall rules installed');
    } else if (!this.net) {
      this.log.warn({ network: net.name }, 'FIREWALL=off: instances can reach every service on the host and the private network');
    }
    if (!this.net || this.net.id !== net.id) this.log.info({ network: net.name, subnet: net.subnet, gateway_ip: net.gatewayIp }, 'instance network ready');
    this.net = net;
    return net;
  }

  /** Base URL (…/api) of the gateway as instances reach it. */
  gatewayUrl(): string {
    if (this.config.INSTANCE_GATEWAY_URL) return this.config.INSTANCE_GATEWAY_URL.replace(/\/+$/, '');
    if (!this.net) throw new AppError('DOCKER_UNAVAILABLE', 'The instance network is not ready yet');
    return `http://${this.net.gatewayIp}:${this.config.GATEWAY_PORT}/api`;
  }

  keysUrl(): string {
    return `${this.gatewayUrl()}/keys/retrieve`;
  }

  assertReady(): void {
    if (!this.net) throw new AppError('DOCKER_UNAVAILABLE', 'The instance network is not ready yet');
  }
}
