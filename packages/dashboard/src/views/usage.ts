import type { View } from '../app.ts';
import { fill, h, limitText, when } from '../dom.ts';

/** Today's requests, instances and storage against the plan's quotas. */
export const usageView: View = (app, main) => {
  const body = h('div', {});
  fill(main, h('h1', {}, 'Usage'), body);
  const meter = (id: string, label: string, used: number, limit: number, unit = '') =>
    h(
      'div',
      { class: 'meter' },
      h('label', { for: id }, label),
      limit === -1
        ? h('span', { id }, `${used.toLocaleString('en')}${unit} used (unlimited)`)
        : h('meter', { id, min: 0, max: limit, value: Math.min(used, limit), high: limit * 0.8, optimum: 0 }),
      h('span', { id: `${id}-text` }, `${used.toLocaleString('en')}${unit} of ${limitText(limit)}${limit === -1 ? '' : unit}`),
    );
  void (async () => {
    try {
      const u = await app.api.usage();
      fill(
        body,
        h('p', {}, `Plan: ${u.tier}. Requests count per day and reset ${when(u.requests.reset_at)}.`),
        meter('usage-requests', 'Requests today', u.requests.used, u.requests.limit),
        meter('usage-instances', 'Instances', u.instances.active, u.instances.limit),
        meter('usage-storage', 'Storage', Math.round(u.storage.used_mb), u.storage.limit_mb, ' MB'),
      );
    } catch (err) {
      app.fail(err);
    }
  })();
};
