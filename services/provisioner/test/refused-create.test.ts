import net from 'node:net';
import type { Subscription } from 'nats';
import { describe, expect, it } from 'vitest';
import { contracts, listen } from '@agenthost/shared';
import { eventHistory, type ServiceProcess, STANDIN, docker, dockerTry, newUser, waitFor } from '@agenthost/testkit';
import { crashSuite, pausedAt } from './crash-suite.ts';

// A create its user was refused, or that failed and was rolled back, was never shown to them as created: it publishes
// no events.instance.deleted (which the gateway turns into an instance.deleted webhook and stream event), and keyvault
// forgets its credentials by the purge request instead (docs/decisions/0053-a-refused-create-purges-its-keys.md).
// Each path that undoes a create: refused by the lease, undone in the request, left to the reconciler by a Docker
// failure, and undone by the reconciler after a crash (with keyvault away meanwhile).
const P = contracts.provisioner;
const KV = contracts.keyvault;
const PORTS: [number, number] = [19700, 19709];
const s = crashSuite('refused', PORTS);

/** The instance ids of this user's events.instance.deleted, as JetStream holds them. */
const deletedIds = async (user_id: string) =>
  (await eventHistory<{ instance_id: string; user_id: string }>(s.n.nc, P.instanceDeleted.subject))
    .filter((e) => e.user_id === user_id)
    .map((e) => e.instance_id);
/** The instances keyvault holds credentials for, of this user. */
const credentialsOf = async (user_id: string) =>
  (await s.db.query<{ instance_id: string }>('select instance_id from keyvault.instances where user_id = $1 order by instance_id', [user_id])).rows.map(
    (r) => r.instance_id,
  );
const rows = async () =>
  (await s.db.query<{ id: string; step: string; deleting_at: Date | null }>('select id, step, deleting_at from provisioner.instances')).rows;

/** The instance ids of the requests seen on a keyvault subject (a core subscription sees every request). */
function requests(c: typeof KV.issueCredentials | typeof KV.purgeInstance): { ids: string[]; sub: Subscription } {
  const ids: string[] = [];
  const sub = listen(s.n.nc, { subject: c.subject, payload: c.input }, (p) => void ids.push(p.instance_id), undefined);
  return { ids, sub };
}

/**
 * A create that works, then its delete: the user's only deleted event must be this one. JetStream holds events in
 * order, so the event of an undone create before it (published earlier) would be read as well.
 */
async function realDeleteIsTheOnlyOne(user_id: string): Promise<void> {
  const ok = await s.n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
  await s.n.call(P.remove, { user_id, instance_id: ok.instance_id });
  await waitFor('the deleted event', async () => (await deletedIds(user_id)).length > 0);
  expect(await deletedIds(user_id)).toEqual([ok.instance_id]);
  expect(await credentialsOf(user_id)).toEqual([]);
}

/** Runs a test's provisioners and subscriptions, and ends them whatever happens. */
async function using(fn: (own: { procs: ServiceProcess[]; subs: Subscription[] }) => Promise<void>): Promise<void> {
  const own = { procs: [] as ServiceProcess[], subs: [] as Subscription[] };
  try {
    await fn(own);
  } finally {
    for (const sub of own.subs) sub.unsubscribe();
    for (const p of own.procs) await p.kill();
    // Whatever a failed test left, so that the next one starts from nothing.
    const containers = (await dockerTry('ps', '-aq', '--filter', `label=agenthost.scope=${s.network}`)).stdout.split('\n').filter(Boolean);
    if (containers.length) await dockerTry('rm', '-f', ...containers);
    const volumes = (await dockerTry('volume', 'ls', '-q', '--filter', `label=agenthost.scope=${s.network}`)).stdout.split('\n').filter(Boolean);
    if (volumes.length) await dockerTry('volume', 'rm', '-f', ...volumes);
    await s.db.query('delete from provisioner.instances');
  }
}

describe('a create that is refused or rolled back', () => {
  it('refused by the tier: answered at once, no deleted event, and keyvault was never asked', () =>
    using(async (own) => {
      own.procs.push(await s.provisioner());
      const user_id = newUser();
      const issued = requests(KV.issueCredentials);
      own.subs.push(issued.sub);
      const first = await s.n.call(P.create, { user_id, tier: 'free', framework: 'openclaw' });
      const started = Date.now();
      expect(await s.n.fail(P.create, { user_id, tier: 'free', framework: 'openclaw' })).toMatchObject({ code: 'INSTANCE_LIMIT_EXCEEDED' });
      expect(Date.now() - started).toBeLessThan(2000);
      const refused = { issued: [...issued.ids], credentials: await credentialsOf(user_id) };

      // A real delete of a real instance: its event, exactly once, and no other.
      await s.n.call(P.remove, { user_id, instance_id: first.instance_id });
      await waitFor('the deleted event', async () => (await deletedIds(user_id)).length > 0);
      expect(await deletedIds(user_id)).toEqual([first.instance_id]);
      expect(await credentialsOf(user_id)).toEqual([]);
      // Only the instance that exists had credentials; the refused one never had any.
      expect(refused).toEqual({ issued: [first.instance_id], credentials: [first.instance_id] });
    }));

  it('undone in the request (its container could not be created): no deleted event; the credentials issued are purged first', () =>
    using(async (own) => {
      const p = await s.provisioner('leased');
      own.procs.push(p);
      const user_id = newUser();
      const issued = requests(KV.issueCredentials);
      const purged = requests(KV.purgeInstance);
      own.subs.push(issued.sub, purged.sub);
      const pending = s.n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' }, 30_000).then(
        () => undefined,
        (e: { code?: string }) => e,
      );
      await pausedAt(p, 'leased');
      const [row] = await rows();
      // The instance's container name is taken (Docker answers 409): the create fails and undoes itself.
      await docker('create', '--name', `agenthost-${row!.id}`, '--label', `agenthost.scope=${s.network}`, STANDIN);
      process.kill(p.pid()!, 'SIGUSR2');
      const err = await pending;
      expect(err).toBeDefined();
      expect(err!.code).not.toBe('DOCKER_UNAVAILABLE');
      // As the create answered: credentials had been issued for it and purged by request, and the row was gone.
      const answered = { issued: [...issued.ids], purged: [...purged.ids], credentials: await credentialsOf(user_id), rows: await rows() };
      await p.stop();
      own.procs.push(await s.provisioner());
      await realDeleteIsTheOnlyOne(user_id);
      expect(answered).toEqual({ issued: [row!.id], purged: [row!.id], credentials: [], rows: [] });
    }));

  it('left to the reconciler by a Docker failure (its port is taken): no deleted event; the credentials are purged', () =>
    using(async (own) => {
      own.procs.push(await s.provisioner());
      expect(await rows()).toEqual([]);
      const user_id = newUser();
      const purged = requests(KV.purgeInstance);
      own.subs.push(purged.sub);
      // The port the lease gives the next create, held on the address Docker publishes it on: the start fails (HTTP 500).
      const taken = net.createServer((socket) => socket.destroy()); // a probe that connects must not keep close() waiting
      await new Promise<void>((resolve, reject) => taken.once('error', reject).listen(PORTS[0], '127.0.0.1', resolve));
      let left: Awaited<ReturnType<typeof rows>>;
      try {
        expect(await s.n.fail(P.create, { user_id, tier: 'pro', framework: 'openclaw' })).toMatchObject({ code: 'DOCKER_UNAVAILABLE' });
        // Marked for removal (no more Docker calls in the request); the reconciler finishes it.
        left = await rows();
        expect(left).toEqual([expect.objectContaining({ step: 'deleting' })]);
      } finally {
        await new Promise((r) => taken.close(r));
      }
      await waitFor('the reconciler to finish the undo', async () => (await rows()).length === 0, 30_000);
      const undone = { purged: [...purged.ids], credentials: await credentialsOf(user_id) };
      await realDeleteIsTheOnlyOne(user_id);
      expect(undone).toEqual({ purged: [left[0]!.id], credentials: [] });
    }));

  it(
    'undone by the reconciler after a crash: no deleted event; the purge is retried until keyvault answers',
    () =>
      using(async (own) => {
        const user_id = newUser();
        const p = await s.provisioner('container');
        own.procs.push(p);
        const pending = s.n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' }, 4000).catch((e) => e);
        await pausedAt(p, 'container');
        await p.kill();
        await pending;
        const [row] = await rows();
        expect(row).toMatchObject({ step: 'leased', deleting_at: null });
        const id = row!.id;
        // The credentials were issued before the container step.
        expect(await credentialsOf(user_id)).toEqual([id]);

        // keyvault away: the undo removes the container and volume but keeps the row (hidden, deleting) until the
        // purge gets through, so no credential outlives its row.
        const keyvault = s.stack.services.get('keyvault')!;
        await keyvault.stop();
        try {
          own.procs.push(await s.provisioner());
          await waitFor('the undo to go as far as it can', async () => !(await rows()).some((r) => r.id === id && r.deleting_at === null));
          expect(await deletedIds(user_id)).toEqual([]);
          expect(await rows()).toEqual([expect.objectContaining({ id, step: 'deleting' })]);
          expect((await s.n.call(P.list, { user_id })).instances).toEqual([]);
          expect((await s.n.call(P.usage, { user_id })).instances_active).toBe(0);
          expect(await docker('ps', '-aq', '--filter', `label=agenthost.scope=${s.network}`)).toBe('');
        } finally {
          await keyvault.start();
        }
        await waitFor('the reconciler to finish the undo', async () => (await rows()).length === 0, 30_000);
        expect(await credentialsOf(user_id)).toEqual([]);
        await realDeleteIsTheOnlyOne(user_id);
      }),
    120_000,
  );
});
