// The stack and browser every walk in dashboard.test.ts runs against, started once for the file. Its bindings are
// exported live (`export let`), so the tests read what the set-up assigned. The page is opened where users open it,
// at the HTTPS edge's origin (https://agenthost.localhost:<port>), which is also the origin auth signs users in for.
// Ports of this suite: instances 18910-18949, the edge 19671 (HTTPS) and 19672 (HTTP).
import { existsSync } from 'node:fs';
import type { Browser, Page } from 'puppeteer-core';
import { startEdge, startStack, type Edge, type Stack, cleanupDocker, gatewayEnv, provisionerEnv, testNetwork } from '@agenthost/testkit';
import { launch } from './browser.ts';
import { TestWallet } from './test-wallet.ts';

const DIST = new URL('../dist/index.html', import.meta.url);
const network = testNetwork('dashboard');
// One instance on pro, so that the quota is reached by the second create of the walk.
const tiers = {
  free: { memory_mb: 256, cpus: 0.5, pids: 64 },
  pro: { instances: 1, memory_mb: 256, cpus: 0.5, pids: 64 },
  enterprise: { memory_mb: 256, cpus: 0.5, pids: 64 },
};

const EDGE_HTTPS = 19671;

export let stack: Stack;
export let edge: Edge;
/** The gateway's own origin (http://127.0.0.1:<port>), for requests made from Node. */
export let gatewayOrigin: string;
export let browser: Browser;
export let page: Page;
export let wallet: TestWallet;
/** Where the page is opened: the edge's. */
export let origin: string;

export async function startDashboard(): Promise<void> {
  if (!existsSync(DIST)) throw new Error('the dashboard is not built: pnpm --filter @agenthost/dashboard build (deploy/test.sh does it)');
  await cleanupDocker(network);
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    // 18899 and 18900 are the swarm suite's devchain (RPC and WebSocket), published on the host while it runs.
    serviceEnv: {
      provisioner: provisionerEnv({ network, ports: [18910, 18949], tiers }),
      gateway: { ...gatewayEnv, TIER_LIMITS_JSON: JSON.stringify(tiers) },
      // As deploy gives every service the edge's domain and port: auth signs in for the edge's origin.
      auth: { EDGE_HTTPS_PORT: String(EDGE_HTTPS) },
    },
  });
  edge = await startEdge(stack, { httpsPort: EDGE_HTTPS, httpPort: EDGE_HTTPS + 1 });
  gatewayOrigin = stack.baseUrl.replace(/\/api$/, '');
  origin = edge.origin;
  wallet = new TestWallet(stack.chain!.url);
  browser = await launch(edge);
  page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 800 });
  await wallet.install(page);
  // The page's own errors belong in the test's output (the page never logs a token).
  page.on('pageerror', (err) => console.error('page error:', err));
}

export async function stopDashboard(): Promise<void> {
  await browser?.close();
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
}
