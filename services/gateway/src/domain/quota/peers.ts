import { RequestStrategy, type NatsConnection, type Subscription as NatsSubscription } from 'nats';
import { decode, encode, listen, type Logger } from '@agenthost/shared';
import { z } from 'zod';

// The give-back protocol between gateway replicas: a replica that finds a window's counter exhausted
// asks the others (core request-many) to return their unused tokens of that window, then tries again.

export const RELEASE_SUBJECT = 'gateway.usage.release';

/** Ask every replica to give back its unused tokens of a window; resolves when they answered. */
export async function askOthers(nc: NatsConnection, key: string, origin: string, jitterMs: number, log?: Logger): Promise<void> {
  try {
    const replies = await nc.requestMany(RELEASE_SUBJECT, encode({ key, origin }), { strategy: RequestStrategy.JitterTimer, jitter: jitterMs, maxWait: 1000 });
    let returned = 0;
    for await (const m of replies) returned += Number((decode(m.data) as { returned?: number } | undefined)?.returned ?? 0);
    if (returned > 0) log?.debug({ returned }, 'other replicas gave back usage tokens');
  } catch (err) {
    log?.warn({ err }, 'could not ask other gateway replicas for unused usage tokens');
  }
}

const releaseAsk = z.object({ key: z.string().optional(), origin: z.string().optional() });

/** Answer the others' requests: `release(key)` gives back this replica's unused tokens of the window (0 if none). */
export function answerOthers(nc: NatsConnection, origin: string, release: (key: string) => Promise<number>, log?: Logger): NatsSubscription {
  return listen(
    nc,
    { subject: RELEASE_SUBJECT, payload: releaseAsk },
    async (req, msg) => {
      const returned = req.key && req.origin !== origin ? await release(req.key) : 0;
      msg.respond(encode({ returned }));
    },
    log,
  );
}
