import { ApiError, type Device } from '../api.ts';
import type { App } from '../app.ts';
import { fill, h, when } from '../dom.ts';

/**
 * The browsers and apps that asked to use an OpenClaw instance: OpenClaw lets in a browser it has not seen only once
 * its owner approves it, even with the access token. Read when asked (each read runs the instance's own CLI).
 */
export function devicesSection(app: App, root: HTMLElement, id: string): void {
  const body = h('div', { id: 'devices', 'aria-live': 'polite' });
  fill(
    root,
    h(
      'div',
      { class: 'row' },
      h('h2', { id: 'devices-title' }, 'Browsers and apps'),
      h('button', { type: 'button', id: 'devices-check', onclick: () => void load() }, 'Check for requests'),
    ),
    h('p', {}, 'A browser opening the agent’s Control UI for the first time waits here until you approve it.'),
    body,
  );

  const line = (d: Device) => [d.name, d.platform, d.client, d.remote_ip, d.at ? when(d.at) : undefined].filter(Boolean).join(' · ') || 'unnamed device';

  async function load(): Promise<void> {
    try {
      const { pending, paired } = await app.api.devices(id);
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
                  h('button', { type: 'button', onclick: () => void decide(d, 'approve') }, 'Approve'),
                  ' ',
                  h('button', { type: 'button', class: 'danger', onclick: () => void decide(d, 'reject') }, 'Reject'),
                ),
              ),
            )
          : h('p', { id: 'devices-none' }, 'No browser is waiting for approval.'),
        h('p', { id: 'devices-paired' }, `${paired.length} paired.`),
      );
    } catch (err) {
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
      app.say(decision === 'approve' ? `Approved: ${line(d)}. Reload the Control UI in that browser.` : `Rejected: ${line(d)}.`);
    } catch (err) {
      app.fail(err);
    }
    await load();
  }
}
