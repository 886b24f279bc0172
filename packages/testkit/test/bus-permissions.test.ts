import { setTimeout as sleep } from 'node:timers/promises';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, DURABLES, EVENT_STREAM } from '@agenthost/shared';

const { pingSubject } = contracts.ping;
import { startNats, type NatsServer } from '../src/nats.ts';

// The bus refuses whoever has no identity, and each service's identity everything it does not use.

let nats: NatsServer;
const open: NatsConnection[] = [];

beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await Promise.all(open.map((c) => c.close().catch(() => {})));
  await nats?.stop();
});

async function as(who: string): Promise<NatsConnection> {
  const c = await nats.connect(who);
  open.push(c);
  return c;
}

/** The permission error the server sends for a publish or subscribe, or undefined when it was allowed. */
async function refusal(nc: NatsConnection, action: () => void): Promise<string | undefined> {
  const errors: string[] = [];
  const watching = (async () => {
    for await (const s of nc.status()) if (s.type === 'error') errors.push(String(s.data));
  })();
  action();
  // A round trip to the server: its -ERR for what came before has arrived by the time flush resolves.
  await nc.flush();
  await sleep(50);
  void watching;
  return errors.find((e) => /permission/i.test(e));
}

const publishRefused = async (nc: NatsConnection, subject: string) => refusal(nc, () => nc.publish(subject, new Uint8Array()));
async function subscribeRefused(nc: NatsConnection, subject: string) {
  let sub: ReturnType<NatsConnection['subscribe']> | undefined;
  const err = await refusal(nc, () => {
    sub = nc.subscribe(subject, { callback: () => {} });
  });
  sub?.unsubscribe();
  return err;
}

describe('the bus refuses connections without an identity', () => {
  it('refuses a TLS connection without credentials', async () => {
    const { authenticator: _a, ...anonymous } = nats.options();
    await expect(connect({ ...anonymous, reconnect: false })).rejects.toThrow(/authorization/i);
  });

  it('refuses a connection without TLS, even with credentials', async () => {
    const { tls: _t, ...plain } = nats.options();
    await expect(connect({ ...plain, reconnect: false })).rejects.toThrow();
  });

  it('refuses a connection that does not verify the server against our CA', async () => {
    const { tls: _t, ...rest } = nats.options();
    await expect(connect({ ...rest, tls: {}, reconnect: false })).rejects.toThrow(/certificate/i);
  });
});

describe("each service's identity is refused what it must not use", () => {
  it('billing-chain cannot call keyvault or the provisioner, nor answer for auth', async () => {
    const billing = await as('billing-chain');
    expect(await publishRefused(billing, contracts.keyvault.store.subject)).toBeDefined();
    expect(await publishRefused(billing, contracts.keyvault.issueCredentials.subject)).toBeDefined();
    expect(await publishRefused(billing, contracts.provisioner.create.subject)).toBeDefined();
    expect(await subscribeRefused(billing, contracts.auth.jwks.subject)).toBeDefined();
  });

  it('only auth serves auth: the gateway cannot answer its own signing-key requests', async () => {
    const gateway = await as('gateway');
    expect(await subscribeRefused(gateway, contracts.auth.jwks.subject)).toBeDefined();
    expect(await subscribeRefused(gateway, 'auth.v1.>')).toBeDefined();
    const auth = await as('auth');
    expect(await subscribeRefused(auth, contracts.auth.jwks.subject)).toBeUndefined();
  });

  it('only the provisioner may ask keyvault for instance credentials; the gateway may use the user-facing key subjects', async () => {
    const gateway = await as('gateway');
    expect(await publishRefused(gateway, contracts.keyvault.issueCredentials.subject)).toBeDefined();
    expect(await publishRefused(gateway, contracts.keyvault.store.subject)).toBeUndefined();
    const provisioner = await as('provisioner');
    expect(await publishRefused(provisioner, contracts.keyvault.issueCredentials.subject)).toBeUndefined();
    expect(await publishRefused(provisioner, contracts.keyvault.store.subject)).toBeDefined();
    const auth = await as('auth');
    expect(await publishRefused(auth, contracts.keyvault.list.subject)).toBeDefined();
    expect(await publishRefused(auth, contracts.provisioner.list.subject)).toBeDefined();
  });

  it("no service can listen to everything or to another service's replies", async () => {
    for (const who of ['gateway', 'auth', 'billing-chain', 'provisioner', 'keyvault']) {
      const nc = await as(who);
      expect(await subscribeRefused(nc, '>'), who).toBeDefined();
      expect(await subscribeRefused(nc, '_INBOX.>'), who).toBeDefined();
      const gatewayReplies = await subscribeRefused(nc, '_INBOX_gateway.>');
      if (who === 'gateway') expect(gatewayReplies).toBeUndefined();
      else expect(gatewayReplies, who).toBeDefined();
    }
  });

  it('only the owner of an event may publish it', async () => {
    const gateway = await as('gateway');
    expect(await publishRefused(gateway, contracts.billing.subscriptionChanged.subject)).toBeDefined();
    expect(await publishRefused(gateway, contracts.provisioner.instanceDeleted.subject)).toBeDefined();
    const provisioner = await as('provisioner');
    expect(await publishRefused(provisioner, contracts.billing.subscriptionChanged.subject)).toBeDefined();
    expect(await publishRefused(provisioner, contracts.provisioner.instanceStatusChanged.subject)).toBeUndefined();
    const billing = await as('billing-chain');
    expect(await publishRefused(billing, contracts.provisioner.instanceStatusChanged.subject)).toBeDefined();
    expect(await publishRefused(billing, contracts.billing.subscriptionChanged.subject)).toBeUndefined();
    expect(await publishRefused(billing, contracts.billing.subscriptionExpiring.subject)).toBeUndefined();
    expect(await publishRefused(gateway, contracts.billing.subscriptionExpiring.subject)).toBeDefined();
  });

  it("a service's identity is refused on another service's JetStream consumer and on stream administration", async () => {
    const keyvault = await as('keyvault');
    const theirs = DURABLES.provisionerSubscriptionChanges;
    expect(await publishRefused(keyvault, `$JS.API.CONSUMER.MSG.NEXT.${EVENT_STREAM}.${theirs}`)).toBeDefined();
    expect(await publishRefused(keyvault, `$JS.API.CONSUMER.DELETE.${EVENT_STREAM}.${theirs}`)).toBeDefined();
    expect(await publishRefused(keyvault, `$JS.API.STREAM.DELETE.${EVENT_STREAM}`)).toBeDefined();
    expect(await publishRefused(keyvault, `$JS.API.STREAM.PURGE.${EVENT_STREAM}`)).toBeDefined();
    expect(await publishRefused(keyvault, `$JS.API.CONSUMER.MSG.NEXT.${EVENT_STREAM}.${DURABLES.keyvaultInstanceDeleted}`)).toBeUndefined();
    // The gateway reads the stream for GET /instance/events (info and message get) and pulls from its own webhook
    // durables only: no one else's consumer, no consumer of another name, no stream administration.
    const gateway = await as('gateway');
    expect(await publishRefused(gateway, `$JS.API.STREAM.INFO.${EVENT_STREAM}`)).toBeUndefined();
    expect(await publishRefused(gateway, `$JS.API.STREAM.MSG.GET.${EVENT_STREAM}`)).toBeUndefined();
    expect(await publishRefused(gateway, `$JS.API.CONSUMER.MSG.NEXT.${EVENT_STREAM}.${theirs}`)).toBeDefined();
    expect(await publishRefused(gateway, `$JS.API.CONSUMER.CREATE.${EVENT_STREAM}.mine`)).toBeDefined();
    expect(await publishRefused(gateway, `$JS.API.CONSUMER.MSG.NEXT.${EVENT_STREAM}.${DURABLES.gatewayWebhooksInstanceStatus}`)).toBeUndefined();
    expect(await publishRefused(gateway, `$JS.API.CONSUMER.DELETE.${EVENT_STREAM}.${DURABLES.gatewayWebhooksInstanceStatus}`)).toBeDefined();
    expect(await publishRefused(gateway, `$JS.API.STREAM.UPDATE.${EVENT_STREAM}`)).toBeDefined();
    expect(await publishRefused(gateway, `$JS.API.STREAM.PURGE.${EVENT_STREAM}`)).toBeDefined();
    expect(await publishRefused(gateway, `$JS.API.STREAM.MSG.DELETE.${EVENT_STREAM}`)).toBeDefined();
  });

  it('health pings go from the gateway to every backend, and not between backends', async () => {
    const gateway = await as('gateway');
    expect(await publishRefused(gateway, pingSubject('keyvault'))).toBeUndefined();
    const billing = await as('billing-chain');
    expect(await publishRefused(billing, pingSubject('keyvault'))).toBeDefined();
  });
});
