import type { Wallet, WalletAccount } from '@wallet-standard/base';
import { ApiError, apiClient, type Api, type Session } from './api.ts';
import type { ChainConfig } from './chain.ts';
import { fill, h } from './dom.ts';
import { forgetInstanceTokens } from './instance-tokens.ts';
import { plain } from './messages.ts';
import { accountOf, walletByName } from './wallets.ts';

/** What every view gets: the API, the chain settings, the session, and ways to speak to the user. */
export interface App {
  api: Api;
  cfg: ChainConfig;
  session: (Session & { wallet_name: string }) | undefined;
  /** A message in the alert region (errors) or the status region (progress, success). */
  say(text: string, kind?: 'error' | 'info'): void;
  /** Say an error in plain words. */
  fail(err: unknown): void;
  go(route: string): void;
  /** The signed-in wallet and its account, for transactions. */
  signer(): Promise<{ wallet: Wallet; account: WalletAccount }>;
  /** Keep the session and show where the user was, or the plans when the wallet has no subscription yet. */
  signedIn(s: Session, walletName: string): Promise<void>;
  signOut(message?: string): void;
}

/** A view renders into `main` and returns what stops its polling. */
export type View = (app: App, main: HTMLElement, param?: string) => (() => void) | void;

const STORE = 'agenthost.session';

export function startApp(cfg: ChainConfig, views: Record<string, View>, root: HTMLElement): void {
  const alert = h('div', { id: 'alert', role: 'alert', class: 'message error', hidden: true });
  const status = h('div', { id: 'status', role: 'status', class: 'message info' });
  const nav = h('nav', { 'aria-label': 'Main' });
  const main = h('main', { id: 'main', tabindex: '-1' });
  fill(root, h('header', {}, h('a', { href: '#/', class: 'brand' }, 'agenthost'), nav), alert, status, main);
  let stop: (() => void) | void;
  let keepMessages = false;

  const app: App = {
    api: apiClient({ token: () => app.session?.token, onUnauthorized: (err) => app.signOut(plain(err)) }),
    cfg,
    session: restore(),
    say(text, kind = 'info') {
      const el = kind === 'error' ? alert : status;
      el.textContent = text;
      el.hidden = !text;
      if (kind === 'info') alert.hidden = true;
    },
    fail: (err) => app.say(plain(err), 'error'),
    go: (route) => {
      if (location.hash === route) return render();
      keepMessages = true; // what the view says next belongs to the page it sends the user to
      location.hash = route;
    },
    async signer() {
      const s = app.session!;
      const wallet = walletByName(s.wallet_name);
      if (!wallet) throw new Error(`The wallet ${s.wallet_name} is not available on this page. Open or unlock it and try again.`);
      return { wallet, account: await accountOf(wallet, s.wallet_address) };
    },
    async signedIn(s, walletName) {
      app.session = { ...s, wallet_name: walletName };
      localStorage.setItem(STORE, JSON.stringify(app.session));
      app.say('');
      alert.hidden = true;
      const subscribed = await app.api.subscription().then(
        () => true,
        (err) => !(err instanceof ApiError && err.code === 'SUBSCRIPTION_NOT_FOUND'),
      );
      if (!subscribed && location.hash !== '#/subscription') app.go('#/subscription');
      else render();
    },
    signOut(message) {
      app.session = undefined;
      localStorage.removeItem(STORE);
      // The route stays in the address bar: after signing in again the user is back where they were.
      render();
      if (message) app.say(message, 'error');
    },
  };

  function render(): void {
    if (typeof stop === 'function') stop();
    stop = undefined;
    const [, name = '', param] = /^#\/([a-z]*)\/?(.*)$/.exec(location.hash) ?? [];
    const signedIn = !!app.session && Date.parse(app.session.expires_at) > Date.now();
    if (app.session && !signedIn) {
      app.session = undefined;
      localStorage.removeItem(STORE);
      app.say('Your session has expired. Sign in again to continue where you were.', 'error');
    }
    const route = !signedIn ? 'signin' : views[name] && name !== 'signin' ? name : 'instances';
    renderNav(route);
    main.replaceChildren();
    stop = views[route]!(app, main, param ? decodeURIComponent(param) : undefined);
  }

  function renderNav(route: string): void {
    if (!app.session || route === 'signin') return fill(nav);
    const link = (to: string, label: string) => h('a', { href: `#/${to}`, ...(route === to ? { 'aria-current': 'page' } : {}) }, label);
    fill(
      nav,
      link('instances', 'Instances'),
      link('subscription', 'Subscription'),
      link('usage', 'Usage'),
      h('span', { class: 'who', title: app.session.wallet_address }, short(app.session.wallet_address)),
      h('button', { type: 'button', onclick: () => void logout() }, 'Sign out'),
    );
  }

  async function logout(): Promise<void> {
    try {
      await app.api.logout();
    } catch {
      // The token may be expired already: signing out here is what matters.
    }
    // The agents' tokens leave with the user (a shared computer); an expired session keeps them for the next sign-in.
    forgetInstanceTokens();
    app.signOut();
    app.say('You are signed out.');
  }

  window.addEventListener('hashchange', () => {
    if (!keepMessages) {
      app.say('');
      alert.hidden = true;
    }
    keepMessages = false;
    render();
    // The new page's heading takes the focus (a screen reader reads where the user is now; the next Tab goes on from
    // there). It is no control, so it gets no focus ring (style.css): a ring round the content looked like an error.
    const heading = main.querySelector('h1');
    if (heading) {
      heading.tabIndex = -1;
      heading.focus({ preventScroll: true });
    } else main.focus();
  });
  render();
}

function restore(): App['session'] {
  try {
    return JSON.parse(localStorage.getItem(STORE) ?? 'null') ?? undefined;
  } catch {
    return undefined;
  }
}

export const short = (a: string): string => `${a.slice(0, 4)}…${a.slice(-4)}`;
