import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, relative, sep } from 'node:path';
import type { Logger } from '@agenthost/shared';
import type { GatewayConfig } from '../config.ts';

/**
 * The dashboard's built files (packages/dashboard/dist), served at `/` until the edge serves them. Kept in
 * its own file, apart from the API's router, so that moving the HTTP layer moves one mount.
 *
 * The files are read once at start (a few hundred kB): each answer is from memory with a strong ETag.
 * Vite names everything under assets/ by its content hash, so those are cached for a year; index.html and
 * config.json must be asked again each time (no-cache + ETag), or a new deploy would not be seen.
 */
export interface StaticFiles {
  /** Answers GET/HEAD of a dashboard path; false when the path is not one (the caller answers 404). */
  serve(req: IncomingMessage, res: ServerResponse, path: string): boolean;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};

interface File {
  body: Buffer;
  type: string;
  etag: string;
  cache: string;
}

const file = (body: Buffer, type: string, cache: string): File => ({
  body,
  type,
  cache,
  etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
});

/** What the page needs before its first API call: where the chain is, and the tier table (GET /config.json). */
function dashboardConfig(config: GatewayConfig) {
  return {
    solana_rpc_url: config.DASHBOARD_SOLANA_RPC_URL,
    solana_chain: config.DASHBOARD_SOLANA_CHAIN,
    ...(config.SUBSCRIPTION_PROGRAM_ID ? { program_id: config.SUBSCRIPTION_PROGRAM_ID } : {}),
    ...(config.TREASURY ? { treasury: config.TREASURY } : {}),
    ...(config.DASHBOARD_TIER_PRICES_LAMPORTS ? { prices: config.DASHBOARD_TIER_PRICES_LAMPORTS } : {}),
    tiers: config.TIER_LIMITS_JSON,
  };
}

export function staticFiles(config: GatewayConfig, log: Logger): StaticFiles | undefined {
  const dir = config.DASHBOARD_DIR;
  let index: File;
  const files = new Map<string, File>();
  try {
    for (const name of walk(dir)) {
      const path = `/${relative(dir, name).split(sep).join('/')}`;
      const immutable = path.startsWith('/assets/');
      files.set(
        path,
        file(readFileSync(name), TYPES[extname(name)] ?? 'application/octet-stream', immutable ? 'public, max-age=31536000, immutable' : 'no-cache'),
      );
    }
    index = files.get('/index.html')!;
    if (!index) throw new Error('no index.html');
  } catch (err) {
    log.warn({ dir, err: (err as Error).message }, 'dashboard not served: its files are not built (pnpm --filter @agenthost/dashboard build)');
    return undefined;
  }
  files.set('/', index);
  files.set('/config.json', file(Buffer.from(JSON.stringify(dashboardConfig(config))), TYPES['.json']!, 'no-cache'));
  log.info({ dir, files: files.size }, 'serving the dashboard at /');

  return {
    serve(req, res, path) {
      if (req.method !== 'GET' && req.method !== 'HEAD') return false;
      const f = files.get(path);
      if (!f) return false;
      res.setHeader('Content-Type', f.type);
      res.setHeader('Cache-Control', f.cache);
      res.setHeader('ETag', f.etag);
      res.setHeader('X-Content-Type-Options', 'nosniff');
      if (f === index) {
        // The page runs wallet code: no framing, and scripts only from here. Wallet icons are data: URIs.
        res.setHeader(
          'Content-Security-Policy',
          `default-src 'self'; img-src 'self' data:; connect-src 'self' ${config.DASHBOARD_SOLANA_RPC_URL}; frame-ancestors 'none'; base-uri 'none'`,
        );
        res.setHeader('Referrer-Policy', 'no-referrer');
      }
      if (req.headers['if-none-match'] === f.etag) {
        res.statusCode = 304;
        res.end();
        return true;
      }
      res.setHeader('Content-Length', f.body.length);
      res.statusCode = 200;
      res.end(req.method === 'HEAD' ? undefined : f.body);
      return true;
    },
  };
}

function* walk(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) yield* walk(full);
    else yield full;
  }
}
