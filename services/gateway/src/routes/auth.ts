import { contracts } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import type { Router } from '../http/router.ts';
import { jsonBody, route } from '../http/route.ts';

export function authRoutes(ctx: GatewayContext, r: Router): void {
  route(r, ctx, 'get', '/auth/nonce', 'public', { summary: 'A single-use nonce and the Sign-In With Solana message to sign', query: contracts.auth.nonceCreate.input, response: contracts.auth.nonceCreate.output }, async ({ req, requestId }) =>
    ctx.call(contracts.auth.nonceCreate, { wallet_address: String(req.query.wallet_address ?? '') }, requestId),
  );
  route(r, ctx, 'post', '/auth/login', 'public', { summary: 'Exchange a signed Sign-In With Solana message (ours, or one the wallet built from sign_in_input) for an access token (24 h)', body: contracts.auth.login.input, response: contracts.auth.login.output }, async ({ req, requestId }) => {
    // Our message signed as written, or a wallet-built one (solana:signIn's output): auth tells them apart.
    return ctx.call(contracts.auth.login, jsonBody(req) as never, requestId);
  });
  route(r, ctx, 'post', '/auth/logout', 'token', { summary: 'Revoke the access token of this request on every gateway (other tokens stay valid)', response: contracts.auth.revoke.output }, async ({ req, requestId }) => {
    const claims = await ctx.tokens.verify(req.get('authorization'));
    const out = await ctx.call(contracts.auth.revoke, { jti: claims.jti, exp: claims.exp, user_id: claims.user_id }, requestId);
    ctx.tokens.revoke(claims.jti, claims.exp); // this replica at once, whatever the broadcast's timing
    return out;
  });
  route(r, ctx, 'get', '/auth/me', 'token', { summary: 'Who the access token belongs to', response: contracts.api.whoAmI }, async ({ caller }) => ({ user_id: caller.user_id, wallet_address: caller.wallet_address }));
}
