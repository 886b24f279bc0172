import type { Instance } from '../api.ts';
import type { View } from '../app.ts';
import { confirmDialog, fill, h } from '../dom.ts';
import { forgetInstanceToken } from '../instance-tokens.ts';
import { nextPoll, showToken, statusBadge } from './instances.ts';
import { devicesSection } from './devices.ts';
import { keysSection } from './keys.ts';
import { openAgentSection, openLink } from './open-agent.ts';

/** One instance: live status with CPU and memory, stop/start/restart/delete, the log tail, its keys and their audit. */
export const instanceView: View = (app, main, id) => {
  if (!id) return app.go('#/instances');
  const heading = h('h1', {}, 'Instance');
  const facts = h('dl', { class: 'facts', id: 'instance-facts' });
  const actions = h('div', { class: 'row', role: 'group', 'aria-label': 'Instance actions' });
  const token = h('section', { 'aria-live': 'polite' });
  const open = h('section', { id: 'open-section' });
  const logs = h('pre', { id: 'logs', tabindex: '0', 'aria-label': 'Log tail' });
  const keys = h('section', { 'aria-labelledby': 'keys-title' });
  const devices = h('section', { 'aria-labelledby': 'devices-title' });
  fill(
    main,
    h('p', {}, h('a', { href: '#/instances' }, '← All instances')),
    heading,
    facts,
    actions,
    open,
    token,
    h(
      'section',
      { 'aria-labelledby': 'logs-title' },
      h(
        'div',
        { class: 'row' },
        h('h2', { id: 'logs-title' }, 'Logs (last 100 lines)'),
        h('button', { type: 'button', onclick: () => void loadLogs() }, 'Refresh logs'),
      ),
      logs,
    ),
    devices,
    keys,
  );
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let current: Instance | undefined;
  let busy = false;

  let streaming = false;
  const live = new AbortController();

  async function poll(): Promise<void> {
    try {
      draw(await app.api.instance(id!));
    } catch (err) {
      app.fail(err);
    }
    // CPU and memory are worth a read every 2 s while the page is looked at, unless the event stream carries the
    // status (then every 20 s); the hidden tab reads nothing.
    if (!stopped)
      timer = nextPoll(!streaming, () => {
        if (!stopped) void poll();
      });
  }

  /** The status from GET /instance/events as it changes; when the stream fails the page goes back to polling. */
  async function watch(): Promise<void> {
    try {
      for await (const ev of app.api.events(id!, live.signal)) {
        streaming = true;
        if (ev.event === 'deleted') {
          forgetInstanceToken(id!);
          return app.go('#/instances');
        }
        const d = ev.data as { status?: Instance['status']; failure_reason?: string };
        if (current && d.status && d.status !== current.status)
          draw({ ...current, status: d.status, ...(d.failure_reason ? { failure_reason: d.failure_reason } : { failure_reason: undefined }) } as Instance);
      }
    } catch {
      /* the stream could not be opened or was refused: polling carries the status */
    } finally {
      streaming = false;
    }
  }

  /** The status and busy state the action buttons were last drawn for. */
  let actionsFor = '';

  function draw(i: Instance): void {
    if (!current) openAgentSection(app, open, i);
    current = i;
    heading.textContent = i.name;
    const mem = i.memory_usage_mb === undefined ? '—' : `${i.memory_usage_mb.toFixed(0)} MB of ${i.memory_limit_mb ?? '?'} MB`;
    fill(
      facts,
      h('dt', {}, 'Status'),
      h('dd', { id: 'instance-status' }, statusBadge(i), i.failure_reason ? ` ${i.failure_reason}` : ''),
      h('dt', {}, 'Address'),
      h('dd', {}, openLink(i, i.url)),
      h('dt', {}, 'CPU'),
      h('dd', { id: 'instance-cpu' }, i.cpu_usage_percent === undefined ? '—' : `${i.cpu_usage_percent.toFixed(1)} %`),
      h('dt', {}, 'Memory'),
      h('dd', { id: 'instance-memory' }, mem),
      h('dt', {}, 'Up for'),
      h('dd', {}, i.uptime_seconds === undefined ? '—' : duration(i.uptime_seconds)),
      h('dt', {}, 'Framework'),
      h('dd', {}, `${i.framework} ${i.version}`),
    );
    // Redrawn whenever what they depend on changed: a status the event stream brought while an action was running
    // (drawn disabled then) gets its buttons enabled once the action is over, though the status itself is the same.
    if (actionsFor !== `${i.status}:${busy}`) drawActions(i);
  }

  function drawActions(i: Instance): void {
    actionsFor = `${i.status}:${busy}`;
    const focused = document.activeElement?.id;
    const button = (action: 'stop' | 'start' | 'restart', label: string, enabled: boolean) =>
      h('button', { type: 'button', id: `do-${action}`, disabled: !enabled || busy, onclick: () => void lifecycle(action, label) }, label);
    fill(
      actions,
      button('stop', 'Stop', i.status === 'running' || i.status === 'provisioning' || i.status === 'sleeping'),
      button('start', 'Start', i.status === 'stopped' || i.status === 'failed' || i.status === 'sleeping'),
      button('restart', 'Restart', i.status === 'running' || i.status === 'failed' || i.status === 'sleeping'),
      h('button', { type: 'button', id: 'do-delete', class: 'danger', disabled: busy, onclick: () => void remove() }, 'Delete instance'),
    );
    if (focused) document.getElementById(focused)?.focus();
  }

  async function lifecycle(action: 'stop' | 'start' | 'restart', label: string): Promise<void> {
    busy = true;
    drawActions(current!);
    app.say(`${label}: asked…`);
    try {
      const out = await app.api.lifecycle(action, id!);
      app.say(`${label}: the instance is now ${out.status}.`);
      if (out.access_token) {
        showToken(app, token, { ...current!, access_token: out.access_token });
        openAgentSection(app, open, current!);
      }
    } catch (err) {
      app.say('');
      app.fail(err);
    } finally {
      busy = false;
      draw(await app.api.instance(id!).catch(() => current!));
    }
  }

  async function remove(): Promise<void> {
    const name = current?.name ?? id!;
    if (!(await confirmDialog(`Delete ${name}? Its container, data, logs and keys are removed for good.`, `Delete ${name}`))) return;
    busy = true;
    try {
      await app.api.remove(id!);
      forgetInstanceToken(id!);
      app.go('#/instances');
      app.say(`${name} was deleted.`);
    } catch (err) {
      app.fail(err);
      busy = false;
    }
  }

  async function loadLogs(): Promise<void> {
    try {
      const { lines } = await app.api.logs(id!, 100);
      logs.textContent = lines.length ? lines.join('\n') : '(no output yet)';
    } catch (err) {
      app.fail(err);
    }
  }

  void poll();
  void watch();
  void loadLogs();
  const stopDevices = devicesSection(app, devices, id);
  keysSection(app, keys, id);
  return () => {
    stopped = true;
    stopDevices();
    live.abort();
    clearTimeout(timer);
  };
};

function duration(s: number): string {
  const d = Math.floor(s / 86400),
    hr = Math.floor((s % 86400) / 3600),
    m = Math.floor((s % 3600) / 60);
  return d ? `${d} d ${hr} h` : hr ? `${hr} h ${m} min` : m ? `${m} min` : `${Math.floor(s)} s`;
}
