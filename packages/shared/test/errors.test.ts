import { describe, expect, it } from 'vitest';
import { AppError, ERROR_CODES, toAppError } from '../src/index.ts';

describe('errors', () => {
  it('turns unknown errors into a generic 500 that hides the internal message', () => {
    const e = toAppError(new Error('connection to 10.0.0.5:5432 failed with password hunter2'));
    expect(e.toBody()).toEqual({ error: 'Internal server error', code: 'INTERNAL', status: 500 });
  });

  it('answers 503 with Retry-After, not 500, when the database cannot be reached, its name not resolving included', () => {
    for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']) {
      const e = toAppError(Object.assign(new Error(`getaddrinfo ${code} postgres`), { code, syscall: 'getaddrinfo', hostname: 'postgres' }));
      expect(e.toBody(), code).toEqual({ error: 'The database is unavailable; retry shortly', code: 'SERVICE_UNAVAILABLE', status: 503 });
      expect(e.retryAfter).toBe(1);
    }
  });

  it('round-trips a service error across the wire', () => {
    const e = AppError.fromWire(new AppError('INSTANCE_LIMIT_EXCEEDED', 'Tier free allows 1 instance').toWire());
    expect(e.toBody()).toEqual({ error: 'Tier free allows 1 instance', code: 'INSTANCE_LIMIT_EXCEEDED', status: 403 });
  });

  it('does not trust the message of an INTERNAL error or an unknown code from the wire', () => {
    expect(AppError.fromWire({ code: 'INTERNAL', message: 'stack trace here' }).message).toBe('Internal server error');
    expect(AppError.fromWire({ code: 'MADE_UP', message: 'x' }).code).toBe('INTERNAL');
  });

  it('tells a failure of its own (5xx) from a refusal (4xx, and a 501 for what this deployment does not offer)', () => {
    expect(new AppError('SERVICE_UNAVAILABLE').failure).toBe(true);
    expect(toAppError(new Error('boom')).failure).toBe(true);
    expect(new AppError('DEVICES_UNSUPPORTED').failure).toBe(false);
    expect(new AppError('INSTANCE_NOT_FOUND').failure).toBe(false);
  });

  it('gives every code a 4xx or 5xx status', () => {
    for (const { status } of Object.values(ERROR_CODES)) expect(status).toBeGreaterThanOrEqual(400);
  });
});
