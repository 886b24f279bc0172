import { randomUUID } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats, waitFor, type NatsServer } from '../../testkit/src/index.ts';
import { consumeEvents, contracts, createLogger, EVENT_STREAM, keepEventStream, publishEvent, type Subscription } from '../src/index.ts';

// A service started while JetStream does not answer (a NATS cluster without quorum, a node restarting) used to exit at
// once ("JetStream system temporarily unavailable"), and its supervisor restarted it in a loop for as long as the
// outage lasted. Now it starts, and the stream and its durable consumers are set up when JetStream is back: the events
// published from then on are handled. A real nats-server, first without JetStream, then with it.

const ev = contracts.provisioner.instanceDeleted;
const log = createLogger('events-away-test', 'silent');
let nats: NatsServer;
let nc: NatsConnection;
let sub: Subscription | undefined;

beforeAll(async () => {
  nats = await startNats({ jetstream: false });
  nc = await nats.connect();
}, 120_000);

afterAll(async () => {
  await sub?.stop();
  await nc?.close();
  await nats?.stop();
});

describe('the event stream while JetStream is away', () => {
  it('starts a publisher and a consumer anyway, answers publishes 503, and sets both up when JetStream is back', async () => {
    await keepEventStream(nc, { replicas: 1 }, log);
    const handled: string[] = [];
    sub = await consumeEvents(nc, ev, `away-${randomUUID().slice(0, 8)}`, async (p) => void handled.push(p.instance_id), log);
    const payload = () => ({
      instance_id: `inst-${randomUUID().replaceAll('-', '').slice(0, 20)}`,
      user_id: randomUUID(),
      deleted_at: new Date().toISOString(),
    });
    await expect(publishEvent(nc, ev, payload())).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });

    await nats.pause();
    await nats.restart({ jetstream: true });
    // Nothing is called again: the stream appears, and an event published then reaches the consumer.
    await waitFor(
      'the stream set up again',
      async () => (await (await nc.jetstreamManager()).streams.info(EVENT_STREAM)).config.name === EVENT_STREAM,
      60_000,
      250,
    );
    const after = payload();
    await publishEvent(nc, ev, after);
    await waitFor('the event handled', async () => handled.includes(after.instance_id), 60_000, 100);
  }, 180_000);
});
