// What first-hour.test.ts runs against, started once for the file: a stack with the real OpenClaw image, the HTTPS
// edge in front of it (the dashboard at https://agenthost.localhost:19673, instances at their own hosts under it),
// and Chromium trusting the edge's CA. Ports of this suite: instances 19675-19679, the edge 19673 (HTTPS) and 19674.
import { existsSync } from 'node:fs';
import type { Browser, Page } from 'puppeteer-core';
import { checkoutVariant, startEdge, startStack, type Edge, type Stack, cleanupDocker, gatewayEnv, provisionerEnv, testNetwork } from '@agenthost/testkit';
import { launch } from './browser.ts';

const DIST = new URL('../dist/index.html', import.meta.url);
const EDGE_HTTPS = 19673;
const network = testNetwork('first-hour');

export let stack: Stack;
export let edge: Edge;
export let browser: Browser;
/** The gateway's own address (http://127.0.0.1:<port>): it serves the dashboard too, but auth signs in for the edge's. */
export let gatewayOrigin: string;

export async function startFirstHour(): Promise<void> {
  if (!existsSync(DIST)) throw new Error('the dashboard is not built: pnpm --filter @agenthost/dashboard build (deploy/test.sh does it)');
  await cleanupDocker(network);
  // This checkout's launcher (it allows the instance's public origin and wires provider keys).
  const version = await checkoutVariant('agenthost/openclaw', 'first-hour', [
    { from: 'deploy/images/openclaw/launch.mjs', to: '/opt/agenthost/openclaw/launch.mjs' },
  ]);
  const env = provisionerEnv({
    network,
    ports: [19675, 19679],
    extra: { INSTANCE_URL_TEMPLATE: `https://{id}.agenthost.localhost:${EDGE_HTTPS}`, READY_TIMEOUT_SECONDS: '240', DEFAULT_VERSION: version },
  });
  // The real OpenClaw image and the tiers' real resources, as a user gets them.
  delete env.FRAMEWORK_IMAGES;
  delete env.TIER_LIMITS_JSON;
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    // As deploy gives every service the edge's domain and port: auth signs users in for the edge's origin.
    serviceEnv: { provisioner: env, gateway: gatewayEnv, auth: { EDGE_HTTPS_PORT: String(EDGE_HTTPS) } },
  });
  edge = await startEdge(stack, { httpsPort: EDGE_HTTPS, httpPort: EDGE_HTTPS + 1 });
  gatewayOrigin = stack.baseUrl.replace(/\/api$/, '');
  browser = await launch(edge);
}

export async function stopFirstHour(): Promise<void> {
  await browser?.close();
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
}

/** Every WebSocket frame a page receives (the Control UI's connection to its gateway), from now on. */
export async function recordFrames(page: Page): Promise<string[]> {
  const frames: string[] = [];
  const cdp = await page.createCDPSession();
  await cdp.send('Network.enable');
  cdp.on('Network.webSocketFrameReceived', (e: { response: { payloadData: string } }) => frames.push(e.response.payloadData));
  return frames;
}
