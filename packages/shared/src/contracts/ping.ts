import { z } from 'zod';
import { contract } from './contract.ts';

/** Every service answers <service>.v1.health.ping, used by readiness checks. */
export const pingSubject = (service: string) => `${service}.v1.health.ping`;
export const pingFor = (service: string) =>
  contract(pingSubject(service), z.object({}), z.object({ service: z.string(), ok: z.boolean(), version: z.string() }));
