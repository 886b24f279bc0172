import type { Request, Response } from 'express';
import type { z } from 'zod';
import type { ErrorCode } from '@agenthost/shared';
import type { Subscription } from '../domain/entitlement.ts';

type Method = 'get' | 'post' | 'put' | 'delete';

/**
 * public: no credentials. token: a valid access token only (no subscription lookup). user: a valid access token (subscription optional, counted when present).
 * subscriber: a valid token and an active subscription (402 otherwise), counted against the tier.
 * instance: the route authenticates an instance itself (X-Instance-ID / X-Instance-Secret); not counted.
 */
export type Access = 'public' | 'token' | 'user' | 'subscriber' | 'instance';

export interface Caller {
  user_id: string;
  wallet_address: string;
  subscription: Subscription | null;
}

interface RouteCtx {
  req: Request;
  res: Response;
  requestId: string;
  /** Present for token, user and subscriber routes. */
  caller: Caller;
  /** Audit metadata for backends. */
  meta: { ip: string; user_agent: string; request_id: string };
}

/**
 * One API route, as data: mounted once by mount.ts (access checks in the order of spec §5, then the handler, whose
 * return value is sent as JSON with the status in res.statusCode, default 200) and described in the OpenAPI document
 * by openapi.ts (schemas from the shared contracts).
 */
export interface Route {
  method: Method;
  /** Below /api, with ":name" parameters. */
  path: string;
  access: Access;
  /** The OpenAPI operationId (camelCase, stable: generated clients name their methods after it). Required unless internal. */
  operationId?: string;
  summary: string;
  /**
   * The error codes the handler and its backend refuse with, besides those that follow from access, inputs and path
   * (openapi-errors.ts). The document lists them; the contract test fails on an answer with a code not listed.
   */
  errors?: ErrorCode[];
  /** JSON body (POST/PUT/DELETE). */
  body?: z.ZodType;
  /** Query parameters, as an object schema. */
  query?: z.ZodObject;
  response?: z.ZodType;
  /** The response's media type when it is not JSON (the schema then describes each event's data). */
  responseType?: 'text/event-stream';
  /** The route also answers as server-sent events (when a query asks for it); each event's data, for the OpenAPI document. */
  stream?: z.ZodType;
  /** Request headers the route reads, by name, with what they mean (for the OpenAPI document). */
  requestHeaders?: Record<string, string>;
  /** The limit that answers 429 with Retry-After (the sign-in limits of the public endpoints). */
  rateLimit?: string;
  /**
   * A read whose last answer is kept per user and served again, with `Age`, while its backend is unavailable
   * (domain/last-answers.ts).
   */
  lastKnown?: true;
  /** false: not counted against the tier's limits. POST /subscription/register, so a user at the limit can still upgrade. */
  count?: false;
  /** Left out of the OpenAPI document (health checks and the document itself). */
  internal?: true;
  /** Returns the JSON body, or nothing after answering itself (the key watch's event stream). */
  handler: (r: RouteCtx) => Promise<unknown> | unknown;
}

/** The JSON body as an object: anything else becomes {} and then fails validation field by field. */
export const jsonBody = (req: Request): Record<string, unknown> =>
  req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? (req.body as Record<string, unknown>) : {};

/** A query parameter given once, as a string (undefined when absent or repeated). */
export const queryString = (req: Request, name: string): string | undefined => {
  const v = (req.query as Record<string, unknown>)[name];
  return typeof v === 'string' ? v : undefined;
};

/**
 * The JSON answer, without Express's ETag and freshness work: API answers are per caller and carry changing usage
 * headers, so a 304 would never be right, and hashing every body costs time.
 */
export function sendJson(res: Response, body: unknown): void {
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}
