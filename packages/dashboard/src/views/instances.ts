import type { Instance } from '../api.ts';
import type { App, View } from '../app.ts';
import { fill, h, when } from '../dom.ts';
import { keepInstanceToken } from '../instance-tokens.ts';
import { openLink } from './open-agent.ts';

/**
 * How often the list and an instance are read again (an event stream may replace this later). Every read counts
 * against the plan's daily requests (1,000 on free), so the page reads often only while something is changing,
 * and not at all while the tab is hidden.
 */
export const POLL_MS = 2000;
export const IDLE_POLL_MS = 20_000;
const settling = (i: Pick<Instance, 'status'>) => i.status === 'provisioning';

/** The delay before the next read: short while an instance is changing, long otherwise, and none while hidden. */
export function nextPoll(changing: boolean, read: () => void): ReturnType<typeof setTimeout> {
  return setTimeout(
    function tick() {
      if (document.hidden) document.addEventListener('visibilitychange', read, { once: true });
      else read();
    },
    changing ? POLL_MS : IDLE_POLL_MS,
  );
}

/** The instances with their status (polled), and create with progress until running (from the event stream). */
export const instancesView: View = (app, main) => {
  const created = h('section', { id: 'created', 'aria-live': 'polite' });
  const table = h('div', { class: 'table' });
  const name = h('input', {
    id: 'new-name',
    name: 'name',
    maxlength: 63,
    pattern: '[A-Za-z0-9][A-Za-z0-9 ._-]*',
    placeholder: 'my-agent',
    autocomplete: 'off',
  });
  const submit = h('button', { type: 'submit' }, 'Create instance');
  const form = h(
    'form',
    {
      class: 'row',
      'aria-labelledby': 'create-title',
      onsubmit: (e: Event) => {
        e.preventDefault();
        void onCreate();
      },
    },
    h('label', { for: 'new-name' }, 'Name (optional)'),
    name,
    submit,
  );
  fill(main, h('h1', {}, 'Instances'), h('h2', { id: 'create-title' }, 'New OpenClaw agent'), form, created, h('h2', {}, 'Your instances'), table);
  let last = '';
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopStream = () => {};

  async function refresh(): Promise<void> {
    let changing = false;
    try {
      const { instances } = await app.api.instances();
      changing = instances.some(settling);
      const key = JSON.stringify(instances.map((i) => [i.instance_id, i.status, i.name, i.failure_reason]));
      if (key !== last) {
        last = key;
        draw(instances);
      }
    } catch (err) {
      app.fail(err);
    }
    if (!stopped)
      timer = nextPoll(changing, () => {
        if (!stopped) void refresh();
      });
  }

  function draw(instances: Instance[]): void {
    const focused = document.activeElement?.id;
    if (!instances.length) fill(table, h('p', { id: 'no-instances' }, 'No instances yet. Create one above.'));
    else
      fill(
        table,
        h(
          'table',
          { id: 'instances' },
          h('caption', { class: 'visually-hidden' }, 'Your instances and their status'),
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Name'),
              h('th', { scope: 'col' }, 'Status'),
              h('th', { scope: 'col' }, 'Address'),
              h('th', { scope: 'col' }, 'Created'),
            ),
          ),
          h(
            'tbody',
            {},
            instances.map((i) =>
              h(
                'tr',
                { 'data-instance': i.instance_id },
                h('th', { scope: 'row' }, h('a', { id: `link-${i.instance_id}`, href: `#/instance/${encodeURIComponent(i.instance_id)}` }, i.name)),
                h('td', {}, statusBadge(i)),
                h('td', {}, openLink(i, i.url, { 'aria-label': `Open ${i.name} in a new tab` })),
                h('td', {}, when(i.created_at)),
              ),
            ),
          ),
        ),
      );
    if (focused) document.getElementById(focused)?.focus();
  }

  async function onCreate(): Promise<void> {
    submit.disabled = true;
    app.say('Creating the instance…');
    try {
      const inst = await app.api.create(name.value.trim() || undefined);
      name.value = '';
      showToken(app, created, inst);
      last = '';
      await follow(inst);
      // The list may be on its long wait: read it now and restart the loop from here.
      clearTimeout(timer);
      void refresh();
    } catch (err) {
      app.say('');
      app.fail(err);
    } finally {
      submit.disabled = false;
    }
  }

  /** Progress of one create until running or failed. */
  async function follow(inst: Instance): Promise<void> {
    const bar = h('progress', { id: 'create-progress', 'aria-label': `Starting ${inst.name}` });
    const label = h('span', {}, `${inst.name}: provisioning…`);
    created.append(h('p', { class: 'progress' }, bar, ' ', label));
    const done = (now: { status: string; failure_reason?: string }) => {
      bar.remove();
      label.textContent = now.status === 'running' ? `${inst.name} is running.` : `${inst.name} failed to start: ${now.failure_reason ?? 'no reason given'}.`;
      // The progress line (a live region) says it; a failure is also an alert.
      app.say('');
      if (now.status === 'failed') app.say(label.textContent, 'error');
    };
    // The status from the event stream; polling only if the stream fails.
    const live = new AbortController();
    stopStream = () => live.abort();
    try {
      for await (const ev of app.api.events(inst.instance_id, live.signal)) {
        const d = ev.data as { status?: string; failure_reason?: string };
        if (d.status === 'running' || d.status === 'failed')
          return done({ status: d.status, ...(d.failure_reason ? { failure_reason: d.failure_reason } : {}) });
        if (ev.event === 'deleted') return;
      }
      if (live.signal.aborted) return;
    } catch {
      /* polled below */
    } finally {
      live.abort();
    }
    for (let lost = 0; ; ) {
      if (stopped) return;
      try {
        const now = await app.api.instance(inst.instance_id);
        if (now.status === 'running' || now.status === 'failed') return done(now);
        lost = 0;
      } catch (err) {
        // A dropped connection (a network change, an edge restart) is not the end of the create: read again.
        if (!(err instanceof TypeError) || ++lost > 10) throw err;
      }
      await new Promise((r) => setTimeout(r, POLL_MS / 2));
    }
  }

  void refresh();
  return () => {
    stopped = true;
    stopStream();
    clearTimeout(timer);
  };
};

/** A sleeping instance's badge says how deeply (and so how fast it wakes): frozen or swapped wake in about a second, checkpointed in seconds. */
const DEPTH: Record<string, string> = { frozen: 'wakes at once', swapped: 'wakes at once', checkpointed: 'wakes in seconds', stopped: 'wakes by booting' };

export function statusBadge(i: Pick<Instance, 'status' | 'failure_reason' | 'sleep_depth'>): HTMLElement {
  const title = i.failure_reason ?? (i.sleep_depth ? `asleep (${i.sleep_depth}): ${DEPTH[i.sleep_depth] ?? ''}` : undefined);
  return h('span', { class: `badge ${i.status}`, ...(title ? { title } : {}) }, i.status);
}

/** The access token, shown this once (the API never returns it again) and kept in this browser for Open, with copy and open. */
export function showToken(app: App, where: HTMLElement, inst: Pick<Instance, 'instance_id' | 'name' | 'url' | 'access_token'>): void {
  if (!inst.access_token) return;
  const token = inst.access_token;
  keepInstanceToken(inst.instance_id, token);
  const field = h('input', { id: 'access-token', readonly: true, value: token, 'aria-describedby': 'token-note', class: 'mono' });
  const copy = h(
    'button',
    {
      type: 'button',
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(token);
          copy.textContent = 'Copied';
        } catch {
          field.select();
          app.say('Copying is not allowed here: the token is selected, press Ctrl+C (⌘C) to copy it.');
        }
      },
    },
    'Copy access token',
  );
  fill(
    where,
    h(
      'div',
      { class: 'token', role: 'group', 'aria-labelledby': 'token-title' },
      h('h3', { id: 'token-title' }, `Access token of ${inst.name}`),
      h(
        'p',
        { id: 'token-note' },
        'This is shown once. This browser keeps it, so Open signs you in to the agent’s own interface; copy it too, to open the agent from another browser.',
      ),
      h('label', { for: 'access-token' }, 'Access token'),
      field,
      h(
        'div',
        { class: 'row' },
        copy,
        openLink(inst, `Open ${inst.name}`, { class: 'button' }),
        h('button', { type: 'button', onclick: () => where.replaceChildren() }, 'I have saved it, hide the token'),
      ),
    ),
  );
}
