import type { Instance } from '../api.ts';
import type { App } from '../app.ts';
import { fill, h } from '../dom.ts';
import { instanceToken, keepInstanceToken, openUrl } from '../instance-tokens.ts';

type Target = Pick<Instance, 'instance_id' | 'name' | 'url'>;

/**
 * A link that opens the agent's Control UI in a new tab, signed in: its token in the fragment when this browser
 * keeps it. rel="noreferrer" (which implies noopener): the new tab learns nothing of the dashboard and sends no
 * Referer.
 */
export function openLink(i: Target, label: string, props: Record<string, unknown> = {}): HTMLAnchorElement {
  const opened = () => {
    sessionStorage.setItem(`agenthost.opened.${i.instance_id}`, String(Date.now()));
    window.dispatchEvent(new CustomEvent(OPENED, { detail: i.instance_id }));
  };
  return h(
    'a',
    { href: openUrl(i.url, instanceToken(i.instance_id)), target: '_blank', rel: 'noreferrer', onclick: opened, onauxclick: opened, ...props },
    label,
  );
}

/** Sent on window (detail: the instance id) when the user opens an agent: its browser is likely to ask to pair now. */
export const OPENED = 'agenthost:opened';

/** When this tab last opened the instance's Control UI (ms since the epoch), or 0. */
export const lastOpened = (id: string): number => Number(sessionStorage.getItem(`agenthost.opened.${id}`)) || 0;

/**
 * The instance page's way into the agent: "Open" when this browser keeps the token, else a field to paste it (the
 * token is shown once, at create; another browser, or cleared site data, does not have it).
 */
export function openAgentSection(app: App, root: HTMLElement, i: Target): void {
  const token = instanceToken(i.instance_id);
  if (token) {
    fill(
      root,
      h(
        'p',
        { class: 'row' },
        openLink(i, `Open ${i.name}`, { class: 'button', id: 'open-agent' }),
        h('span', {}, 'The agent’s Control UI, in a new tab, signed in with its access token.'),
      ),
    );
    return;
  }
  const field = h('input', { id: 'paste-token', type: 'password', required: true, autocomplete: 'off', class: 'mono', 'aria-describedby': 'paste-note' });
  fill(
    root,
    h(
      'form',
      {
        class: 'stack',
        'aria-labelledby': 'paste-title',
        onsubmit: (e: Event) => {
          e.preventDefault();
          keepInstanceToken(i.instance_id, field.value.trim());
          app.say(`The access token of ${i.name} is kept in this browser: Open signs in with it.`);
          openAgentSection(app, root, i);
        },
      },
      h('h2', { id: 'paste-title' }, 'Open the agent'),
      h(
        'p',
        { id: 'paste-note' },
        `This browser does not hold the access token of ${i.name} (it is shown once, when the instance is created). Paste it to open the agent signed in, or `,
        openLink(i, 'open it without', { id: 'open-agent' }),
        ' and enter the token there.',
      ),
      h('label', { for: 'paste-token' }, 'Access token'),
      field,
      h('button', { type: 'submit' }, 'Keep the token in this browser'),
    ),
  );
}
