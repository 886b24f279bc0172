import { readFile, writeFile } from 'node:fs/promises';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, publishEvent } from '@agenthost/shared';
import { signIn, startStack, waitFor, type Session, type Stack } from '@agenthost/testkit';
import { isForbiddenAddress } from '../src/domain/webhooks/target.ts';

// IPv6 addresses that carry a forbidden IPv4 address (security review, issue 29, finding 6): refused as webhook
// targets when written in the URL, and when a name resolves to one, at registration and at each delivery. Names
// resolve through the system's resolver: this suite adds its own lines to /etc/hosts (and removes them after).

/** Each transition form, carrying 127.0.0.1 unless said otherwise. */
const FORMS = [
  '::127.0.0.1', // IPv4-compatible
  '::ffff:0:7f00:1', // IPv4-translated (SIIT)
  '2002:7f00:1::1', // 6to4
  '64:ff9b:1::7f00:1', // NAT64, local-use prefix
  '64:ff9b::7f00:1', // NAT64, well-known prefix
  '64:ff9b::a9fe:a9fe', // NAT64 to the metadata service, 169.254.169.254
  '2001:0:4136:e378:8000:63bf:80ff:fffe', // Teredo: its client, inverted in the last 32 bits
];
/** A public address the names resolve to first, so that they can be registered. */
const PUBLIC = '93.184.215.14';
const HOSTS = '/etc/hosts';
const TAG = `# agenthost webhook-ipv6 test ${process.pid}`;
const run = process.pid.toString(36);
const nameFor = (what: string, i: number) => `${what}-${i}-${run}.hooks.test`;

/** Replaces this suite's lines of /etc/hosts (written in place: it may be a bind mount). */
async function hosts(entries: Array<[address: string, name: string]>): Promise<void> {
  const kept = (await readFile(HOSTS, 'utf8')).split('\n').filter((l) => l !== '' && !l.endsWith(TAG));
  await writeFile(HOSTS, `${[...kept, ...entries.map(([a, n]) => `${a} ${n} ${TAG}`)].join('\n')}\n`);
}

let stack: Stack;
let provisionerBus: NatsConnection;
let alice: Session;

beforeAll(async () => {
  stack = await startStack({
    // billing-chain: a signed-in user's requests look up their subscription (none here).
    services: ['auth', 'billing-chain'],
    devchain: true,
    serviceEnv: { gateway: { WEBHOOK_RETRY_BASE_MS: '300', WEBHOOK_POLL_MS: '300', WEBHOOK_TIMEOUT_MS: '2000' } },
  });
  provisionerBus = await stack.nats.connect('provisioner');
  alice = await signIn(stack.api);
}, 120_000);

afterAll(async () => {
  await hosts([]);
  await provisionerBus?.drain();
  await stack?.stop();
});

const register = (url: string) => alice.api.post('/webhooks', { url, events: ['instance.status'] });

describe('webhook targets in IPv6 transition forms', () => {
  it('refuses every form written in the URL, and a name resolving to one, with WEBHOOK_URL_REFUSED', async () => {
    await hosts(FORMS.map((f, i) => [f, nameFor('at-register', i)]));
    const urls = [...FORMS.map((f) => `https://[${f}]/hook`), ...FORMS.map((_, i) => `https://${nameFor('at-register', i)}/hook`)];
    for (const url of urls) {
      const r = await register(url);
      expect({ url, status: r.status, code: r.body?.code }).toEqual({ url, status: 400, code: 'WEBHOOK_URL_REFUSED' });
    }
    expect((await alice.api.get('/webhooks')).body.webhooks).toEqual([]);
  });

  it('refuses a delivery when the name has come to resolve to a transition form since it was registered', async () => {
    await hosts(FORMS.map((_, i) => [PUBLIC, nameFor('at-delivery', i)]));
    const ids: string[] = [];
    for (const [i] of FORMS.entries()) {
      const r = await register(`https://${nameFor('at-delivery', i)}/hook`);
      expect(r.status, r.text).toBe(200);
      ids.push(r.body.id as string);
    }
    // DNS rebinding: each name now points at a transition form of a forbidden address.
    await hosts(FORMS.map((f, i) => [f, nameFor('at-delivery', i)]));
    await publishEvent(provisionerBus, contracts.provisioner.instanceStatusChanged, {
      instance_id: 'ipv6-one',
      user_id: alice.user_id,
      status: 'running',
      at: new Date().toISOString(),
      generation: 1,
      seq: 1,
    });
    for (const [i, id] of ids.entries()) {
      const attempted = await waitFor(
        `a delivery attempt to ${FORMS[i]}`,
        async () => {
          const [d] = (await alice.api.get(`/webhooks/${id}/deliveries`)).body.deliveries as Array<{ attempts: number; last_error?: string }>;
          return d && d.attempts >= 1 && d.last_error ? d : undefined;
        },
        30_000,
        200,
      );
      expect({ form: FORMS[i], error: attempted.last_error }).toEqual({ form: FORMS[i], error: expect.stringMatching(/^The webhook URL is refused/) });
    }
  }, 90_000);

  it('still allows the transition forms of public addresses, and public IPv6', () => {
    for (const a of ['64:ff9b::5db8:d70e', '2002:5db8:d70e::1', '::ffff:93.184.215.14', '2001:0:4136:e378:8000:63bf:a247:28f1', '2606:4700:4700::1111']) {
      expect({ a, forbidden: isForbiddenAddress(a) }).toEqual({ a, forbidden: false });
    }
  });
});
