import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgenthost } from '@agenthost/sdk';
import { repoRoot, signIn, startEdge, startStack, type Edge, type Session, type Stack } from '@agenthost/testkit';
import { signedInHome } from './cli-home.ts';

// The default deployment's address, https://agenthost.localhost, from Node as a user's script or the CLI reaches it:
// a real edge (Caddy with its local CA) in front of a gateway, no /etc/hosts entry for the name (glibc's resolver
// has no .localhost rule: fetch failed with ENOTFOUND), and the certificate still checked against the name.

const HTTPS = 19790;
const HTTP = 19791;
const exec = promisify(execFile);
let stack: Stack;
let edge: Edge;
let alice: Session;
let home: string;

beforeAll(async () => {
  stack = await startStack({ services: ['auth'] });
  edge = await startEdge(stack, { httpsPort: HTTPS, httpPort: HTTP });
  alice = await signIn(stack.api);
  home = signedInHome(alice, 'cli-localhost');
}, 240_000);

afterAll(async () => {
  await edge?.stop();
  await stack?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('https://agenthost.localhost from Node', () => {
  it('the name is not in /etc/hosts: only the SDK maps it to the loopback', () => {
    expect(readFileSync('/etc/hosts', 'utf8')).not.toMatch(/agenthost\.localhost/);
  });

  it('bin/agenthost reaches the API through the edge, trusting the local CA by NODE_EXTRA_CA_CERTS', async () => {
    const r = await exec('bash', [path.join(repoRoot, 'bin/agenthost'), 'call', 'GET', '/auth/me'], {
      env: {
        PATH: '/usr/local/bin:/usr/bin:/bin',
        AGENTHOST_HOME: home,
        AGENTHOST_API_URL: `https://agenthost.localhost:${HTTPS}/api`,
        NODE_EXTRA_CA_CERTS: edge.caFile,
      },
      timeout: 60_000,
    });
    expect(JSON.parse(r.stdout)).toMatchObject({ user_id: alice.user_id, wallet_address: alice.wallet.address });
  });

  it("the SDK with the CA as an option; without it the edge's certificate is refused: only the address is changed", async () => {
    const trusting = createAgenthost({ baseUrl: `https://agenthost.localhost:${HTTPS}/api`, token: alice.token, ca: edge.ca() });
    const me = await trusting.api.GET('/auth/me');
    expect(me.response.status).toBe(200);
    expect(me.data).toMatchObject({ user_id: alice.user_id });

    const untrusting = createAgenthost({ baseUrl: `https://agenthost.localhost:${HTTPS}/api`, token: alice.token });
    const refused = await untrusting.api.GET('/auth/me').catch((e: Error & { cause?: { code?: string } }) => e.cause?.code);
    expect(refused).toMatch(/CERT|SELF_SIGNED|UNABLE_TO/);
  });
});
