import type { App } from '../app.ts';
import type { KeyChange } from '../api.ts';
import { confirmDialog, fill, h, when } from '../dom.ts';

const ACTIONS: Record<string, string> = { key_stored: 'stored', key_updated: 'updated', key_deleted: 'deleted', key_retrieved: 'read by the instance' };

/** An instance's provider keys by name (values are never shown or read back), and their audit log. */
export function keysSection(app: App, root: HTMLElement, id: string): void {
  const list = h('div', {});
  const audit = h('div', {});
  const nameIn = h('input', {
    id: 'key-name',
    required: true,
    pattern: '[A-Za-z_][A-Za-z0-9_]{0,99}',
    placeholder: 'OPENAI_API_KEY',
    autocomplete: 'off',
    class: 'mono',
    'aria-describedby': 'key-name-help',
  });
  const valueIn = h('input', { id: 'key-value', type: 'password', required: true, autocomplete: 'off' });
  const form = h(
    'form',
    {
      class: 'stack',
      'aria-labelledby': 'key-form-title',
      onsubmit: (e: Event) => {
        e.preventDefault();
        void save();
      },
    },
    h('h3', { id: 'key-form-title' }, 'Add or replace a key'),
    h('label', { for: 'key-name' }, 'Name (an environment variable name)'),
    h(
      'p',
      { id: 'key-name-help' },
      'A provider\'s usual name (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, GROQ_API_KEY, MISTRAL_API_KEY, XAI_API_KEY, …) is given to that provider in OpenClaw, unless your OpenClaw config sets that provider\'s key itself. Any other name is yours to reference: { "source": "exec", "provider": "agenthost", "id": "<NAME>" }.',
    ),
    nameIn,
    h('label', { for: 'key-value' }, 'Value'),
    valueIn,
    h('button', { type: 'submit' }, 'Save key'),
  );
  fill(root, h('h2', { id: 'keys-title' }, 'Provider keys'), list, form, h('h2', { id: 'audit-title' }, 'Key audit log'), audit);

  async function load(): Promise<void> {
    try {
      const [{ keys }, { records }] = await Promise.all([app.api.keys(id), app.api.audit(id)]);
      fill(
        list,
        !keys.length
          ? h('p', { id: 'no-keys' }, 'No keys yet.')
          : h(
              'ul',
              { id: 'keys', class: 'keys' },
              keys.map((k) =>
                h(
                  'li',
                  {},
                  h('span', { class: 'mono' }, k.key_name),
                  ` updated ${when(k.updated_at)} `,
                  h(
                    'button',
                    {
                      type: 'button',
                      'aria-label': `Replace the value of ${k.key_name}`,
                      onclick: () => {
                        nameIn.value = k.key_name;
                        valueIn.focus();
                      },
                    },
                    'Replace',
                  ),
                  h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${k.key_name}`, onclick: () => void remove(k.key_name) }, 'Delete'),
                ),
              ),
            ),
      );
      fill(
        audit,
        !records.length
          ? h('p', {}, 'No key operations yet.')
          : h(
              'table',
              { id: 'audit' },
              h('caption', { class: 'visually-hidden' }, 'Key operations, newest first'),
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ['When', 'Key', 'What', 'Length', 'From'].map((t) => h('th', { scope: 'col' }, t)),
                ),
              ),
              h(
                'tbody',
                {},
                records.map((r) =>
                  h(
                    'tr',
                    {},
                    h('td', {}, when(r.timestamp)),
                    h('td', { class: 'mono' }, r.key_name),
                    h('td', {}, ACTIONS[r.action] ?? r.action),
                    h('td', {}, `${r.key_length} bytes`),
                    h('td', {}, r.ip_address || '—'),
                  ),
                ),
              ),
            ),
      );
    } catch (err) {
      app.fail(err);
    }
  }

  const outcome = (what: string, r: KeyChange) =>
    app.say(r.applied ? `${what}; the running agent has it now.` : `${what}. The agent picks it up at its next start${r.reason ? ` (${r.reason})` : ''}.`);

  async function save(): Promise<void> {
    const name = nameIn.value.trim();
    const value = valueIn.value;
    const exists = !!list.querySelector(`[aria-label="Delete ${CSS.escape(name)}"]`);
    app.say(`Saving ${name}…`);
    try {
      outcome(`${name} ${exists ? 'replaced' : 'saved'}`, exists ? await app.api.updateKey(id, name, value) : await app.api.storeKey(id, name, value));
      nameIn.value = '';
      valueIn.value = '';
    } catch (err) {
      app.say('');
      app.fail(err);
    }
    await load();
  }

  async function remove(name: string): Promise<void> {
    if (!(await confirmDialog(`Delete the key ${name}? The agent loses it.`, `Delete ${name}`))) return;
    try {
      outcome(`${name} deleted`, await app.api.deleteKey(id, name));
    } catch (err) {
      app.fail(err);
    }
    await load();
  }

  void load();
}
