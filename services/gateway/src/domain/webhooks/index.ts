import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { NatsConnection } from 'nats';
import { AppError, type contracts, EVENT_STREAM, type Logger } from '@agenthost/shared';
import type { GatewayConfig } from '../../config.ts';
import type { GatewayDB } from '../../db/schema.ts';
import { WebhookEndpoints } from './endpoints.ts';
import { WebhookFanout } from './fanout.ts';
import { gatewayDataKey } from '../data-key.ts';
import { receiverCas } from './sender.ts';
import { sendTestEvent } from './test-event.ts';
import type { Lookup } from './target.ts';
import { DeliveryWorker } from './worker.ts';

/** Outbound webhooks: the endpoints users manage, the fan-out of bus events into deliveries, and the sender. */
export class Webhooks {
  readonly endpoints: WebhookEndpoints;
  readonly fanout: WebhookFanout;
  readonly worker: DeliveryWorker;
  private readonly enabled: boolean;
  private readonly log: Logger;
  private readonly db: Kysely<GatewayDB>;
  private stopped = false;

  constructor(db: Kysely<GatewayDB>, config: GatewayConfig, log: Logger, opts: { lookup?: Lookup } = {}) {
    this.db = db;
    const key = config.WEBHOOKS === 'off' ? undefined : gatewayDataKey(config);
    this.enabled = key !== undefined;
    this.log = log;
    const retryMs = config.WEBHOOK_RETRY_HOURS * 3600_000;
    const lookup = opts.lookup ? { lookup: opts.lookup } : {};
    this.worker = new DeliveryWorker(db, {
      log: log.child({ subsystem: 'webhooks' }),
      key,
      allowHosts: config.WEBHOOK_ALLOW_HOSTS,
      ca: receiverCas(config.WEBHOOK_CA_FILE),
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      retryBaseMs: config.WEBHOOK_RETRY_BASE_MS,
      pollMs: config.WEBHOOK_POLL_MS,
      ...lookup,
    });
    const wake = () => this.worker.wake();
    this.endpoints = new WebhookEndpoints(db, {
      perUser: config.WEBHOOKS_PER_USER,
      allowHosts: config.WEBHOOK_ALLOW_HOSTS,
      overlapMs: config.WEBHOOK_SECRET_OVERLAP_HOURS * 3600_000,
      retryMs,
      key,
      wake,
      ...lookup,
    });
    this.fanout = new WebhookFanout(db, { log, retryMs, maxPayloadBytes: config.WEBHOOK_MAX_PAYLOAD_BYTES, wake });
  }

  /** A webhook.test event to one of the user's endpoints, sent now; answers the delivery's outcome. */
  async test(userId: string, webhookId: string): Promise<contracts.webhooks.DeliveryView> {
    if (!this.enabled) throw new AppError('WEBHOOKS_UNAVAILABLE');
    return sendTestEvent(this.db, this.worker, userId, webhookId);
  }

  /** Without a key to seal secrets nothing is consumed or sent (the routes answer WEBHOOKS_UNAVAILABLE). */
  start(nc: NatsConnection): void {
    if (!this.enabled) return;
    this.worker.start();
    void this.consume(nc);
  }

  /**
   * The consumers need the event stream, which the publishing services create (the gateway may not): until it exists
   * the gateway serves everything else and tries again.
   */
  private async consume(nc: NatsConnection): Promise<void> {
    let waited = false;
    while (!this.stopped) {
      try {
        // Asked first, so a missing stream is not met with a create the gateway is not allowed to make.
        await (await nc.jetstreamManager()).streams.info(EVENT_STREAM);
      } catch {
        if (!waited) this.log.warn(`webhook event consumers wait for the ${EVENT_STREAM} stream (created by the services that publish events)`);
        waited = true;
        await sleep(2000);
        continue;
      }
      try {
        await this.fanout.start(nc);
        return;
      } catch (err) {
        await this.fanout.stop();
        this.log.warn({ err }, 'webhook event consumers could not start; trying again');
        await sleep(2000);
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.fanout.stop();
    await this.worker.stop();
  }
}
