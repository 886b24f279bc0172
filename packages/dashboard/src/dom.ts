/** A small DOM builder: the dashboard uses no framework (docs/dashboard.md), so views are plain functions. */
export type Child = Node | string | number | null | undefined | false | Child[];
type Props = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
    else if (k === 'value' && 'value' in el) (el as HTMLInputElement).value = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** Replace an element's content. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** A modal confirmation with the native <dialog> (focus trapping and Escape come with it). */
export function confirmDialog(question: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const dialog = h(
      'dialog',
      { 'aria-labelledby': 'confirm-question' },
      h('p', { id: 'confirm-question' }, question),
      h(
        'div',
        { class: 'row' },
        h('button', { type: 'button', class: 'danger', onclick: () => dialog.close('yes') }, confirmLabel),
        h('button', { type: 'button', onclick: () => dialog.close('no') }, 'Cancel'),
      ),
    );
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'yes');
    });
    document.body.appendChild(dialog);
    dialog.showModal();
  });
}

export const sol = (lamports: number): string => `${(lamports / 1e9).toLocaleString('en', { maximumFractionDigits: 4 })} SOL`;
export const limitText = (n: number): string => (n === -1 ? 'unlimited' : n.toLocaleString('en'));
export const when = (iso: string): string => `${new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' })} UTC`;
