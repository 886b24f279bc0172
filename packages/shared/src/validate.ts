import type { z } from 'zod';
import { AppError } from './errors.ts';

/** A zod failure → 400 VALIDATION_FAILED naming the first bad field. */
export function zodToAppError(error: z.ZodError): AppError {
  const first = error.issues[0];
  const field = first?.path.length ? first.path.join('.') : 'body';
  return new AppError('VALIDATION_FAILED', `${field}: ${first?.message ?? 'invalid'}`, {
    details: { field, issues: error.issues.slice(0, 10).map((i) => ({ path: i.path.join('.'), message: i.message })) },
  });
}

/** Parse or throw a 400 naming the field. */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw zodToAppError(r.error);
  return r.data;
}
