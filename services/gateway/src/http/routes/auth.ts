import { contracts } from '@agenthost/shared';
import type { GatewayContext } from '../../context.ts';
import { jsonBody, type Route } from '../route.ts';

const A = contracts.auth;

export const authRoutes = (ctx: GatewayContext): Route[] => [
  {
    method: 'get',
    path: '/auth/nonce',
    access: 'public',
    operationId: 'createNonce',
    summary: 'A single-use nonce and the Sign-In With Solana message to sign',
    query: A.nonceCreate.input,
    response: A.nonceCreate.output,
    rateLimit: 'nonces per client address (NONCES_PER_ADDRESS) and per wallet from one client address (NONCES_PER_WALLET) in SIGN_IN_WINDOW_SECONDS',
    handler: async ({ req, requestId }) => {
      await ctx.signInLimits.nonce(req.ip ?? '', req.query.wallet_address);
      return ctx.call(A.nonceCreate, { wallet_address: String(req.query.wallet_address ?? '') }, requestId);
    },
  },
  {
    method: 'post',
    path: '/auth/login',
    access: 'public',
    operationId: 'login',
    errors: ['INVALID_SIGNATURE', 'NONCE_INVALID'],
    summary: 'Exchange a signed Sign-In With Solana message (ours, or one the wallet built from sign_in_input) for an access token (24 h)',
    body: A.login.input,
    response: A.login.output,
    rateLimit:
      'logins per client address (LOGINS_PER_ADDRESS) and failed logins per wallet from one client address (LOGINS_PER_WALLET) in SIGN_IN_WINDOW_SECONDS',
    // Our message signed as written, or a wallet-built one (solana:signIn's output): auth tells them apart.
    handler: async ({ req, requestId }) => {
      const b = jsonBody(req);
      const account = b.account as { address?: unknown } | undefined;
      return ctx.signInLimits.login(req.ip ?? '', b.wallet_address ?? account?.address, () => ctx.call(A.login, b as never, requestId));
    },
  },
  {
    method: 'post',
    path: '/auth/logout',
    access: 'token',
    operationId: 'logout',
    summary: 'Revoke the access token of this request on every gateway (other tokens stay valid)',
    response: A.revoke.output,
    handler: async ({ req, requestId }) => {
      const claims = await ctx.tokens.verify(req.get('authorization'));
      const out = await ctx.call(A.revoke, { jti: claims.jti, exp: claims.exp, user_id: claims.user_id }, requestId);
      ctx.tokens.revoke(claims.jti, claims.exp); // this replica at once, whatever the broadcast's timing
      return out;
    },
  },
  {
    method: 'get',
    path: '/auth/me',
    access: 'token',
    operationId: 'whoAmI',
    summary: 'Who the access token belongs to',
    response: contracts.api.whoAmI,
    handler: ({ caller }) => ({ user_id: caller.user_id, wallet_address: caller.wallet_address }),
  },
];
