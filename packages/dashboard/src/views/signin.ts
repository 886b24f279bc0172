import type { View } from '../app.ts';
import { fill, h } from '../dom.ts';
import { plain } from '../messages.ts';
import { onWalletsChanged, signInWallets, signInWithWallet, WalletDeclined } from '../wallets.ts';

/** Pick a wallet found on the page (Wallet Standard) and sign in with it. */
export const signInView: View = (app, main) => {
  const list = h('ul', { class: 'wallets', 'aria-label': 'Wallets' });
  fill(
    main,
    h('h1', {}, 'Sign in'),
    h('p', {}, 'Sign in with a Solana wallet. Your wallet signs a one-time message; no transaction is sent and nothing is paid.'),
    list,
  );
  let busy = false;
  const draw = () => {
    const wallets = signInWallets();
    if (!wallets.length) {
      return fill(
        list,
        h(
          'li',
          {},
          'No Solana wallet was found on this page. Install or unlock a wallet that supports Wallet Standard (Phantom, Solflare, Backpack…), then reload.',
        ),
      );
    }
    fill(
      list,
      wallets.map((w) =>
        h(
          'li',
          {},
          h(
            'button',
            {
              type: 'button',
              class: 'wallet',
              onclick: async (e: Event) => {
                if (busy) return;
                busy = true;
                const button = e.currentTarget as HTMLButtonElement;
                button.setAttribute('aria-busy', 'true');
                app.say(`Waiting for ${w.name}: approve the connection and the sign-in message…`);
                try {
                  await app.signedIn(await signInWithWallet(app.api, w), w.name);
                } catch (err) {
                  app.say('');
                  app.say(err instanceof WalletDeclined ? err.message : `Sign-in failed. ${plain(err)}`, 'error');
                  button.removeAttribute('aria-busy');
                  button.focus();
                } finally {
                  busy = false;
                }
              },
            },
            h('img', { src: w.icon, alt: '', width: 24, height: 24 }),
            `Sign in with ${w.name}`,
          ),
        ),
      ),
    );
  };
  draw();
  return onWalletsChanged(draw);
};
