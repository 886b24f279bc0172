import { ApiError, type Device } from '../api.ts';
import type { App } from '../app.ts';
import { fill, h, when } from '../dom.ts';
import { lastOpened, OPENED } from './open-agent.ts';

/**
 * How often the requests are read while the page is shown: often for a while after the user opened the agent from
 * this tab (its browser asks to pair then), else seldom. Each read runs OpenClaw's CLI in the instance, on its CPU.
 */
const DEVICES_POLL_MS = 4000;
const DEVICES_IDLE_POLL_MS = 30_000;
const DEVICES_BUSY_FOR_MS = 5 * 60_000;

/**
 * The browsers and apps that asked to use an OpenClaw instance: OpenClaw lets in a browser it has not seen only once
 * its owner approves it, even with the access token. Read again while the page is shown, so that a browser opened
 * with "Open" appears here on its own: one read at a time (each runs the instance's own CLI and counts against the
 * daily requests), every 4 s for 5 minutes after an Open, else every 30 s, none while the tab is hidden, and no more
 * for an agent without pairing. Returns what stops the reads.
 */
export function devicesSection(app: App, root: HTMLElement, id: string): () => void {
  const body = h('div', { id: 'devices', 'aria-live': 'polite' });
  fill(
    root,
    h(
      'div',
      { class: 'row' },
      h('h2', { id: 'devices-title' }, 'Browsers and apps'),
      h('button', { type: 'button', id: 'devices-check', onclick: () => void load() }, 'Check for requests now'),
    ),
    h('p', {}, 'A browser opening the agent’s Control UI for the first time waits here until you approve it.'),
    body,
  );

  const line = (d: Device) => [d.name, d.platform, d.client, d.remote_ip, d.at ? when(d.at) : undefined].filter(Boolean).join(' · ') || 'unnamed device';

  let stopped = false;
  let unsupported = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let reading: Promise<void> | undefined;
  /** What was last drawn: an unchanged answer is not drawn again (the focus stays on its buttons). */
  let drawn = '';

  function schedule(): void {
    clearTimeout(timer);
    if (stopped || unsupported) return;
    const tick = () => {
      if (stopped) return;
      if (document.hidden) document.addEventListener('visibilitychange', tick, { once: true });
      else void load();
    };
    timer = setTimeout(tick, Date.now() - lastOpened(id) < DEVICES_BUSY_FOR_MS ? DEVICES_POLL_MS : DEVICES_IDLE_POLL_MS);
  }
  // Opened just now: the next read comes soon, not at the end of a long wait.
  const onOpened = (e: Event) => {
    if ((e as CustomEvent<string>).detail === id && !reading) schedule();
  };
  window.addEventListener(OPENED, onOpened);

  /** One read at a time: a press of the button during a read waits for that read. */
  function load(): Promise<void> {
    reading ??= read().finally(() => {
      reading = undefined;
      schedule();
    });
    return reading;
  }

  async function read(): Promise<void> {
    try {
      const { pending, paired } = await app.api.devices(id);
      const key = JSON.stringify([pending, paired.length]);
      if (key === drawn) return;
      drawn = key;
      const focused = document.activeElement?.id;
      fill(
        body,
        pending.length
          ? h(
              'ul',
              { id: 'devices-pending', class: 'keys' },
              pending.map((d) =>
                h(
                  'li',
                  {},
                  h('span', {}, line(d)),
                  ' ',
                  h('button', { type: 'button', id: `approve-${d.request_id}`, onclick: () => void decide(d, 'approve') }, 'Approve'),
                  ' ',
                  h('button', { type: 'button', id: `reject-${d.request_id}`, class: 'danger', onclick: () => void decide(d, 'reject') }, 'Reject'),
                ),
              ),
            )
          : h('p', { id: 'devices-none' }, 'No browser is waiting for approval.'),
        h('p', { id: 'devices-paired' }, `${paired.length} paired.`),
      );
      if (focused) document.getElementById(focused)?.focus();
    } catch (err) {
      // A read lost on the way (a network change) is read again at the next tick, without alarming the user.
      if (err instanceof TypeError) return;
      drawn = '';
      if (err instanceof ApiError && err.code === 'DEVICES_UNSUPPORTED') unsupported = true;
      if (err instanceof ApiError && (err.code === 'DEVICES_UNSUPPORTED' || err.code === 'INSTANCE_STATE_CONFLICT'))
        return void fill(
          body,
          h('p', { id: 'devices-none' }, err.code === 'DEVICES_UNSUPPORTED' ? 'This agent has no device pairing.' : 'Start the instance to see its devices.'),
        );
      app.fail(err);
    }
  }

  async function decide(d: Device, decision: 'approve' | 'reject'): Promise<void> {
    try {
      await app.api.decideDevice(id, d.request_id ?? '', decision);
      app.say(decision === 'approve' ? `Approved: ${line(d)}. Open the agent again (or reload its tab) in that browser.` : `Rejected: ${line(d)}.`);
    } catch (err) {
      app.fail(err);
    }
    await reading;
    await load();
  }

  void load();
  return () => {
    stopped = true;
    clearTimeout(timer);
    window.removeEventListener(OPENED, onOpened);
  };
}
