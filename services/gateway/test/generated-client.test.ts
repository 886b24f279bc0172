import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn, startStack, subscribe, type Stack } from '@agenthost/testkit';

// A client generated from the served document (openapi-typescript types, openapi-fetch calls) registers a
// subscription: the program below is type-checked with tsc in strict mode, with no cast, then run against the stack.

const run = promisify(execFile);
const gatewayDir = fileURLToPath(new URL('..', import.meta.url));
const tsc = fileURLToPath(new URL('../../../node_modules/.bin/tsc', import.meta.url));

/** What a user of the generated client writes: every field comes from the document's types. */
const CLIENT = `
import createClient from 'openapi-fetch';
import type { paths } from './api.d.ts';

const [baseUrl, token, tx_signature] = process.argv.slice(2) as [string, string, string];
const client = createClient<paths>({ baseUrl, headers: { Authorization: \`Bearer \${token}\` } });
const { data, error, response } = await client.POST('/subscription/register', { body: { tx_signature, tier: 1 } });
const tier: 'free' | 'pro' | 'enterprise' | undefined = data?.subscription.tier;
const code: string | undefined = error?.code;
console.log(JSON.stringify({ status: response.status, tier, code, expires_at: data?.subscription.expires_at }));
`;

let stack: Stack;
let dir: string;
beforeAll(async () => {
  stack = await startStack({ services: ['auth', 'billing-chain'], devchain: true });
  dir = await mkdtemp(join(tmpdir(), 'agenthost-client-'));
  // The program resolves openapi-fetch (and its types) from the gateway's dependencies.
  await symlink(join(gatewayDir, 'node_modules'), join(dir, 'node_modules'), 'dir');
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a client generated from the OpenAPI document', () => {
  it('compiles with no cast and registers a subscription', async () => {
    const doc = (await stack.api.get('/openapi.json')).body;
    await writeFile(join(dir, 'api.d.ts'), astToString(await openapiTS(doc)));
    await writeFile(join(dir, 'register.ts'), CLIENT);
    await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    const strict = [
      '--noEmit',
      '--strict',
      '--target',
      'es2022',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--allowImportingTsExtensions',
      '--types',
      'node',
    ];
    // tsc reports type errors on stdout and exits 2: show them.
    const compiled = await run(tsc, [...strict, '--typeRoots', join(gatewayDir, '../../node_modules/@types'), join(dir, 'register.ts')], { cwd: dir }).catch(
      (e: { stdout: string }) => e,
    );
    expect(compiled.stdout).toBe('');

    const session = await signIn(stack.api);
    const { tx_signature } = await subscribe(stack, session, { tier: 'pro', register: false });
    const out = await run(process.execPath, [join(dir, 'register.ts'), stack.baseUrl, session.token, tx_signature], { cwd: dir });
    const answer = JSON.parse(out.stdout) as { status: number; tier?: string; code?: string; expires_at?: string };
    expect(answer).toMatchObject({ status: 200, tier: 'pro' });
    expect(Date.parse(answer.expires_at!)).toBeGreaterThan(Date.now());
    // The same client, the same transaction by another wallet: the error body is typed too.
    const other = await signIn(stack.api);
    const refused = JSON.parse((await run(process.execPath, [join(dir, 'register.ts'), stack.baseUrl, other.token, tx_signature], { cwd: dir })).stdout);
    expect(refused.status).toBe(400);
    expect(refused.code).toMatch(/^TX_/);
  }, 120_000);
});
