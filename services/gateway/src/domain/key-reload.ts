import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { NatsConnection, Subscription } from 'nats';
import { contracts, encode, listen, publishEvent, safeDecode, type Logger } from '@agenthost/shared';
import type { z } from 'zod';

const K = contracts.keys;
type ApplyResult = z.output<typeof K.applyResult>;
type Change = Omit<z.input<typeof K.keysChanged.payload>, 'applied' | 'reason' | 'at'>;

/** The instance's status as the provisioner sees it (undefined when it cannot tell). */
export type InstanceStatusOf = (userId: string, instanceId: string) => Promise<string | undefined>;

/** How long the replica holding a watch may take to hand a change to its bootstrap. */
const DELIVER_TIMEOUT_MS = 3000;
const RUNNING_LOOKUP_MS = 1000;
/** No replica holds a watch of the instance: no bootstrap of it is connected. */
const NOT_WATCHING = 'instance not running';
/** A sleeping agent (frozen, its watch still open) reads the change when it wakes; nobody waits for that. */
const ASLEEP = 'the instance is asleep: it loads its keys when it wakes';

/**
 * Key hot reload across gateway replicas. A replica holding an instance's watch (GET /keys/watch) listens on
 * that instance's reload subject; the replica that changed the instance's keys asks there, then waits (bounded)
 * for the bootstrap's result, which reaches it on the applied subject from whichever replica took POST /keys/applied.
 */
export class KeyReload {
  private readonly watches = new Set<() => void>();
  private readonly nc: NatsConnection;
  private readonly log: Logger;
  private readonly waitMs: number;
  private readonly statusOf: InstanceStatusOf;

  constructor(nc: NatsConnection, log: Logger, waitMs: number, statusOf: InstanceStatusOf) {
    this.nc = nc;
    this.log = log;
    this.waitMs = waitMs;
    this.statusOf = statusOf;
  }

  /**
   * Listen for changes of one instance while its watch is open. `deliver` sends the change to the bootstrap and
   * resolves once it was written; `end` closes the watch (gateway shutdown). Returns the release function.
   */
  hold(instanceId: string, deliver: (changeId: string) => Promise<void>, end: () => void): () => void {
    const reload = { subject: K.reloadSubject(instanceId), payload: K.reloadRequest };
    const sub = listen(
      this.nc,
      reload,
      (req, msg) =>
        deliver(req.change_id).then(
          () => msg.respond(encode({ delivered: true })),
          (e: unknown) => {
            this.log.warn({ instance_id: instanceId, err: e instanceof Error ? e.message : String(e) }, 'key change not delivered to the watch');
            msg.respond(encode({ delivered: false }));
          },
        ),
      this.log,
    );
    this.watches.add(end);
    return () => {
      this.watches.delete(end);
      sub.unsubscribe();
    };
  }

  /** Ends every watch this replica holds (their bootstraps reconnect to another replica). */
  stop(): void {
    for (const end of [...this.watches]) end();
  }

  /** A bootstrap's result of one change: handed to the replica waiting for it. */
  report(report: z.output<typeof K.appliedReport>): void {
    this.nc.publish(K.appliedSubject(report.instance_id), encode(report));
  }

  /**
   * Tell the instance its keys changed and wait (at most KEYS_APPLY_WAIT_MS) for it to reload them; emits
   * events.keys.changed with the outcome. Never throws: the keys are stored either way.
   */
  async apply(change: Change): Promise<ApplyResult> {
    const changeId = randomBytes(16).toString('base64url');
    const deadline = Date.now() + this.waitMs;
    const answer = this.awaitReport(change.instance_id, changeId, deadline);
    let result: ApplyResult;
    const status = this.status(change);
    try {
      const delivered = await this.deliver(change.instance_id, changeId, deadline);
      // A frozen agent's watch takes the change (it is read at the wake); no answer comes before then.
      const asleep = status.then((s) => (s === 'sleeping' ? { applied: false, reason: ASLEEP } : new Promise<ApplyResult>(() => {})));
      result = delivered ?? (await Promise.race([answer.result, asleep]));
      if (delivered?.reason === NOT_WATCHING && (await status) === 'running') {
        // Running, but its bootstrap keeps no watch (hot reload off, or an agent image that cannot reload).
        result = { applied: false, reason: 'the instance does not reload keys while it runs; restart it to load them' };
      }
    } finally {
      answer.cancel();
    }
    this.emit(change, result);
    return result;
  }

  /** The provisioner's view, given at most RUNNING_LOOKUP_MS so that the answer stays fast. */
  private async status(change: Change): Promise<string | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), RUNNING_LOOKUP_MS)));
    try {
      return await Promise.race([this.statusOf(change.user_id, change.instance_id).catch(() => undefined), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async deliver(instanceId: string, changeId: string, deadline: number): Promise<ApplyResult | undefined> {
    let reply;
    try {
      reply = await this.nc.request(K.reloadSubject(instanceId), encode({ change_id: changeId }), {
        timeout: Math.max(100, Math.min(DELIVER_TIMEOUT_MS, deadline - Date.now())),
      });
    } catch (err) {
      // No responder: no replica holds a watch of this instance, so no bootstrap of it is running.
      const code = (err as { code?: string }).code;
      return { applied: false, reason: code === '503' ? NOT_WATCHING : 'the instance could not be reached in time' };
    }
    const parsed = K.reloadDelivered.safeParse(safeDecode(reply.data));
    return parsed.success && parsed.data.delivered ? undefined : { applied: false, reason: 'the instance could not be reached' };
  }

  private awaitReport(instanceId: string, changeId: string, deadline: number): { result: Promise<ApplyResult>; cancel: () => void } {
    const expected = Buffer.from(changeId);
    let timer: NodeJS.Timeout | undefined;
    let sub: Subscription | undefined;
    const result = new Promise<ApplyResult>((resolve) => {
      timer = setTimeout(() => resolve({ applied: false, reason: 'the instance did not confirm the reload in time' }), Math.max(0, deadline - Date.now()));
      const applied = { subject: K.appliedSubject(instanceId), payload: K.appliedReport };
      sub = listen(
        this.nc,
        applied,
        (report) => {
          const got = Buffer.from(report.change_id);
          if (got.length !== expected.length || !timingSafeEqual(got, expected)) return;
          resolve(report.applied ? { applied: true } : { applied: false, reason: report.reason ?? 'the instance could not reload its keys' });
        },
        this.log,
      );
    });
    return {
      result,
      cancel: () => {
        clearTimeout(timer);
        sub?.unsubscribe();
      },
    };
  }

  private emit(change: Change, result: ApplyResult): void {
    publishEvent(this.nc, K.keysChanged, { ...change, ...result, at: new Date().toISOString() }).catch((err: unknown) =>
      this.log.warn({ instance_id: change.instance_id, err: err instanceof Error ? err.message : String(err) }, 'events.keys.changed not published'),
    );
  }
}
