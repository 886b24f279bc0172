import { ApiError, type SubscriptionStatus, type TierName } from '../api.ts';
import type { App, View } from '../app.ts';
import { balance, cancel, subscribe } from '../chain.ts';
import { confirmDialog, fill, h, limitText, sol, when } from '../dom.ts';

const TIERS: TierName[] = ['free', 'pro', 'enterprise'];
const title = (t: TierName) => t[0]!.toUpperCase() + t.slice(1);

/** The subscription's status and the tiers: subscribe, renew (one more period) and cancel, signed by the wallet. */
export const subscriptionView: View = (app, main) => {
  const status = h('section', { 'aria-labelledby': 'sub-status' });
  const plans = h('section', { 'aria-labelledby': 'plans' });
  fill(main, h('h1', {}, 'Subscription'), status, plans);
  let busy = false;

  async function load(): Promise<void> {
    let sub: SubscriptionStatus | undefined;
    try {
      sub = await app.api.subscription();
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 'SUBSCRIPTION_NOT_FOUND')) return app.fail(err);
    }
    const lamports = await balance(app.cfg, app.session!.wallet_address).catch(() => undefined);
    drawStatus(sub, lamports);
    drawPlans(sub);
  }

  function drawStatus(sub: SubscriptionStatus | undefined, lamports: number | undefined): void {
    const live = sub?.is_active && Date.parse(sub.expires_at) > Date.now();
    fill(
      status,
      h('h2', { id: 'sub-status' }, 'Your plan'),
      !sub
        ? h('p', { id: 'plan-summary' }, 'No subscription yet. Choose a plan below: your wallet pays for 30 days on chain.')
        : h(
            'dl',
            { id: 'plan-summary', class: 'facts' },
            h('dt', {}, 'Plan'),
            h('dd', {}, title(sub.tier)),
            h('dt', {}, 'Status'),
            h('dd', {}, !live ? 'Expired' : sub.cancelled ? 'Cancelled (active until it expires)' : 'Active'),
            h('dt', {}, live ? 'Expires' : 'Expired'),
            h('dd', {}, when(sub.expires_at)),
          ),
      lamports === undefined ? null : h('p', { id: 'wallet-balance' }, `Wallet balance: ${sol(lamports)}`),
      sub && live && !sub.cancelled ? h('button', { type: 'button', class: 'danger', onclick: () => void onCancel() }, 'Cancel subscription') : null,
    );
  }

  function drawPlans(sub: SubscriptionStatus | undefined): void {
    const live = sub?.is_active && Date.parse(sub.expires_at) > Date.now();
    fill(
      plans,
      h('h2', { id: 'plans' }, 'Plans'),
      h(
        'ul',
        { class: 'cards' },
        TIERS.map((t) => {
          const l = app.cfg.tiers[t];
          const current = live && sub!.tier === t;
          const label = current ? `Renew ${title(t)} for 30 more days` : `Subscribe to ${title(t)}`;
          return h(
            'li',
            { class: current ? 'card current' : 'card' },
            h('h3', {}, title(t), current ? ' (your plan)' : ''),
            h('p', { class: 'price' }, `${sol(app.cfg.prices[t])} per 30 days`),
            h(
              'ul',
              {},
              h('li', {}, l.instances === 1 ? '1 instance' : `${limitText(l.instances)} instances`),
              h('li', {}, `${limitText(l.requests_per_day)} requests a day, ${limitText(l.requests_per_minute)} a minute`),
              h('li', {}, `${limitText(l.storage_mb)} MB storage`),
              h('li', {}, `${l.memory_mb} MB memory and ${l.cpus} CPU per instance`),
            ),
            h('button', { type: 'button', onclick: () => void onSubscribe(t, current ? 'renew' : 'subscribe') }, label),
          );
        }),
      ),
    );
  }

  async function run(what: string, action: () => Promise<void>, done: string): Promise<void> {
    if (busy) return;
    busy = true;
    app.say(`${what}: approve the transaction in your wallet, then wait for the chain to confirm it…`);
    try {
      await action();
      app.say(done);
    } catch (err) {
      app.say('');
      app.fail(err);
    } finally {
      busy = false;
      await load();
    }
  }

  const onSubscribe = (t: TierName, kind: 'subscribe' | 'renew') =>
    run(
      kind === 'renew' ? `Renewing ${title(t)}` : `Subscribing to ${title(t)}`,
      async () => {
        const { wallet, account } = await app.signer();
        await subscribe(app.api, app.cfg, wallet, account, t);
      },
      kind === 'renew' ? `${title(t)} renewed for 30 more days.` : `You are subscribed to ${title(t)}.`,
    );

  async function onCancel(): Promise<void> {
    if (
      !(await confirmDialog(
        'Cancel your subscription? Nothing is refunded; your instances keep running until it expires, and no new ones can be created.',
        'Cancel subscription',
      ))
    )
      return;
    await run(
      'Cancelling',
      async () => {
        const { wallet, account } = await app.signer();
        await cancel(app.api, app.cfg, wallet, account);
      },
      'Your subscription is cancelled. It stays active until it expires.',
    );
  }

  void load();
};

export type { App };
