import { newWebhookSecret, webhookHeaders, webhookSignatures } from '@agenthost/shared/webhook-signing';
import { unwrap } from '@agenthost/sdk';
import { client, type Env } from './client.ts';

/** How long the local receiver has to answer one event (the gateway's default WEBHOOK_TIMEOUT_MS). */
const LOCAL_TIMEOUT_MS = 10_000;

/** POSTs one signed body to the local URL: its status, or why there is none. */
async function forward(url: string, msgId: string, body: string, secret: string, signal: AbortSignal): Promise<string> {
  const at = new Date();
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...webhookHeaders(msgId, at, webhookSignatures([secret], msgId, at, body)), 'user-agent': 'agenthost-webhooks-listen/1' },
      body,
      redirect: 'manual',
      signal: AbortSignal.any([signal, AbortSignal.timeout(LOCAL_TIMEOUT_MS)]),
    });
    await res.body?.cancel();
    return String(res.status);
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return `error ${e.cause?.code ?? e.name}`;
  }
}

/**
 * `webhooks listen`, as `stripe listen`: follows the caller's events (GET /webhooks/events, resumed by Last-Event-ID
 * after a drop) and POSTs each to a local URL, signed to Standard Webhooks with a secret of this session's, so a
 * receiver on a laptop sees what a registered endpoint would. Runs until Ctrl-C.
 */
export async function listen(env: Env, opts: { forwardTo: string; events?: string[]; secret?: string }): Promise<void> {
  const url = new URL(opts.forwardTo);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('--forward-to takes an http or https URL');
  if (opts.secret !== undefined && !opts.secret.startsWith('whsec_')) throw new Error('--secret takes a Standard Webhooks secret (whsec_…)');
  const secret = opts.secret ?? newWebhookSecret();
  const wanted = opts.events ? new Set(opts.events) : undefined;
  const stop = new AbortController();
  const quit = () => stop.abort();
  process.once('SIGINT', quit);
  process.once('SIGTERM', quit);
  env.out(`webhook signing secret: ${secret} (this session's; --secret keeps one across runs)`);
  try {
    for await (const m of client(env, true).webhookEvents({ signal: stop.signal })) {
      if (m.event === 'ready') {
        env.out(`ready: forwarding your events${wanted ? ` (${[...wanted].join(', ')})` : ''} to ${url.href}; Ctrl-C to stop`);
        continue;
      }
      if (wanted && !wanted.has(m.event)) continue;
      // The stream sequence names the event: a resumed stream never sends it again, and a receiver dedupes on it.
      const msgId = `msg_${(m.id ?? '0').padStart(16, '0')}`;
      const answer = await forward(url.href, msgId, m.data, secret, stop.signal);
      if (stop.signal.aborted) break;
      env.out(`${m.event} ${msgId} ${answer}`);
    }
  } finally {
    process.off('SIGINT', quit);
    process.off('SIGTERM', quit);
  }
  env.out('stopped');
}

/** `webhooks test <id>`: the gateway sends a signed webhook.test event to the endpoint now; 1 unless delivered. */
export async function test(env: Env, webhookId: string): Promise<number> {
  const d = unwrap(await client(env, true).api.POST('/webhooks/{webhookId}/test', { params: { path: { webhookId } } }));
  const why = d.last_status_code !== undefined ? `HTTP ${d.last_status_code}` : (d.last_error ?? '');
  env.out(`${d.event_type} ${d.id} ${d.status}${why ? ` (${why})` : ''}`);
  return d.status === 'delivered' ? 0 : 1;
}

/** `webhooks list`: the endpoints, to find the id `webhooks test` takes. */
export async function list(env: Env): Promise<void> {
  const { webhooks } = unwrap(await client(env, true).api.GET('/webhooks'));
  for (const w of webhooks) env.out(`${w.id}  ${w.url}  ${w.events.join(',')}`);
}
