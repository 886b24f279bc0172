import { contracts } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import type { Router } from '../http/router.ts';
import { jsonBody, route } from '../http/route.ts';

export function authRoutes(ctx: GatewayContext, r: Router): void {
  route(r, ctx, 'get', '/auth/nonce', 'public', { summary: 'A single-use nonce and the Sign-In With Solana message to sign', query: contracts.auth.nonceCreate.input, response: contracts.auth.nonceCreate.output, rateLimit: 'nonces per client address (NONCES_PER_ADDRESS) and per wallet (NONCES_PER_WALLET) in SIGN_IN_WINDOW_SECONDS' }, async ({ req, requestId }) => {
    await ctx.signInLimits.consume('nonce', req.ip, req.query.wallet_address);
    return ctx.call(contracts.auth.nonceCreate, { wallet_address: String(req.query.wallet_address ?? '') }, requestId);
  });
  route(r, ctx, 'post', '/auth/login', 'public', { summary: 'Exchange a signed nonce for an access token (24 h)', body: contracts.auth.login.input, response: contracts.auth.login.output, rateLimit: 'logins per client address (LOGINS_PER_ADDRESS) and per wallet (LOGINS_PER_WALLET) in SIGN_IN_WINDOW_SECONDS' }, async ({ req, requestId }) => {
    const b = jsonBody(req);
    await ctx.signInLimits.consume('login', req.ip, b.wallet_address);
    return ctx.call(contracts.auth.login, { wallet_address: b.wallet_address as string, signature_base58: b.signature_base58 as string, nonce: b.nonce as string }, requestId);
  });
  route(r, ctx, 'post', '/auth/logout', 'token', { summary: 'Revoke the access token of this request on every gateway (other tokens stay valid)', response: contracts.auth.revoke.output }, async ({ req, requestId }) => {
    const claims = await ctx.tokens.verify(req.get('authorization'));
    const out = await ctx.call(contracts.auth.revoke, { jti: claims.jti, exp: claims.exp, user_id: claims.user_id }, requestId);
    ctx.tokens.revoke(claims.jti, claims.exp); // this replica at once, whatever the broadcast's timing
    return out;
  });
  route(r, ctx, 'get', '/auth/me', 'token', { summary: 'Who the access token belongs to', response: contracts.api.whoAmI }, async ({ caller }) => ({ user_id: caller.user_id, wallet_address: caller.wallet_address }));
}
