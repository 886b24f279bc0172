import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '@agenthost/testkit';
import { render } from '../src/render.ts';

// The SDK's types are generated from the gateway's document and checked in: a route changed without regenerating
// them (pnpm --filter @agenthost/sdk generate, or this test with UPDATE_SDK=1) fails here.

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ services: ['auth'] });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
});

describe('the SDK types', () => {
  it('are what GET /openapi.json generates now', async () => {
    const doc = (await stack.api.get('/openapi.json')).body;
    const fresh = await render(doc);
    const file = new URL('../src/schema.ts', import.meta.url);
    if (process.env.UPDATE_SDK === '1') await writeFile(file, fresh);
    const checkedIn = await readFile(file, 'utf8').catch(() => '');
    expect(checkedIn, 'packages/sdk/src/schema.ts is out of date: run `pnpm --filter @agenthost/sdk generate` against a running gateway').toBe(fresh);
  });
});
