import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@agenthost/shared';
import { startNats, type NatsServer } from '@agenthost/testkit';
import { KeyReload } from '../src/domain/key-reload.ts';

// Two gateway replicas (each with the gateway's own NATS identity): one holds an instance's watch, the other
// changes its keys. What the instance's bootstrap does is played by the test.
let nats: NatsServer;
let holderNc: NatsConnection;
let changerNc: NatsConnection;
let holder: KeyReload;
let changer: KeyReload;
const log = createLogger('test', 'silent');
const notRunning = async () => 'stopped';
const change = (instance_id: string) => ({
  user_id: '7d0c1c3e-2f1b-4a8e-9d7a-5b6c0e1f2a3b',
  instance_id,
  action: 'updated' as const,
  key_names: ['OPENAI_API_KEY'],
});

beforeAll(async () => {
  nats = await startNats();
  holderNc = await nats.connect('gateway');
  changerNc = await nats.connect('gateway');
  holder = new KeyReload(holderNc, log, 1500, notRunning);
  changer = new KeyReload(changerNc, log, 1500, notRunning);
});
afterAll(async () => {
  await holderNc?.drain();
  await changerNc?.drain();
  await nats?.stop();
});

describe('key reload across gateway replicas', () => {
  it('answers at once that an instance without a watch is not running', async () => {
    const t = performance.now();
    expect(await changer.apply(change('inst-nowatch'))).toEqual({ applied: false, reason: 'instance not running' });
    expect(performance.now() - t).toBeLessThan(500);
  });

  it("hands the change to the replica holding the watch and returns the bootstrap's result, ignoring reports of other changes", async () => {
    const release = holder.hold(
      'inst-watched',
      async (changeId) => {
        // The bootstrap: a forged report first (wrong change id), then its real one, through a third replica's POST.
        setTimeout(() => {
          holder.report({ instance_id: 'inst-watched', change_id: 'forged-aaaaaaaaaaaaaaaaaaaa', applied: true });
          holder.report({ instance_id: 'inst-watched', change_id: changeId, applied: false, reason: 'the agent could not resolve 1 of its secrets' });
        }, 50);
      },
      () => {},
    );
    await holderNc.flush();
    expect(await changer.apply(change('inst-watched'))).toEqual({ applied: false, reason: 'the agent could not resolve 1 of its secrets' });
    release();
  });

  it('gives up after the bounded wait when the bootstrap never answers', async () => {
    const release = holder.hold(
      'inst-silent',
      async () => {},
      () => {},
    );
    await holderNc.flush();
    const t = performance.now();
    expect(await changer.apply(change('inst-silent'))).toEqual({ applied: false, reason: 'the instance did not confirm the reload in time' });
    expect(performance.now() - t).toBeGreaterThanOrEqual(1400);
    expect(performance.now() - t).toBeLessThan(2500);
    release();
  });

  it('says a running instance without a watch does not reload while it runs', async () => {
    const running = new KeyReload(changerNc, log, 1500, async () => 'running');
    expect(await running.apply(change('inst-legacy'))).toEqual({
      applied: false,
      reason: 'the instance does not reload keys while it runs; restart it to load them',
    });
  });

  it('answers at once for a sleeping (frozen) instance, whose open watch still takes the change for its wake', async () => {
    let handed = 0;
    const release = holder.hold(
      'inst-frozen',
      async () => void handed++,
      () => {},
    );
    await holderNc.flush();
    const asleep = new KeyReload(changerNc, log, 60_000, async () => 'sleeping');
    expect(await asleep.apply(change('inst-frozen'))).toEqual({ applied: false, reason: 'the instance is asleep: it loads its keys when it wakes' });
    expect(handed).toBe(1);
    release();
  });
});
