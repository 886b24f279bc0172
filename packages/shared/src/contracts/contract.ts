import type { z } from 'zod';

/** A request/reply contract: one subject, validated input and output at both ends. */
export interface Contract<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  subject: string;
  input: I;
  output: O;
  /**
   * How the caller proves for whom it acts (nats/assertion.ts). 'required': only the gateway calls it, for the
   * user_id of its input, with an assertion it signed. 'optional': a service may call it without one (then no
   * user id is believed); with one, it must be valid. Absent: NATS permissions alone decide who may call.
   */
  assertion?: 'required' | 'optional';
  /**
   * A read that changes nothing: the same request sent again only repeats an answer, so its assertion may be
   * used more than once while it lives (the gateway signs one per user, subject and body every ~15 s and the
   * backend verifies each once). Anything that writes accepts an assertion once.
   */
  read?: boolean;
}

export const contract = <I extends z.ZodType, O extends z.ZodType>(
  subject: string,
  input: I,
  output: O,
  opts: { assertion?: 'required' | 'optional'; read?: boolean } = {},
): Contract<I, O> => ({ subject, input, output, ...opts });

/** A contract that acts for the user named by its input's user_id: the gateway's assertion is required. */
export const userContract = <I extends z.ZodType, O extends z.ZodType>(subject: string, input: I, output: O): Contract<I, O> =>
  contract(subject, input, output, { assertion: 'required' });

/** A user's read (nothing changes): the gateway's assertion is required and may be reused while it lives. */
export const userRead = <I extends z.ZodType, O extends z.ZodType>(subject: string, input: I, output: O): Contract<I, O> =>
  contract(subject, input, output, { assertion: 'required', read: true });

export type In<C extends Contract> = z.input<C['input']>;
export type Out<C extends Contract> = z.output<C['output']>;

/** A domain event on the JetStream stream EVENTS. */
export interface EventContract<P extends z.ZodType = z.ZodType> {
  subject: string;
  payload: P;
}

export const event = <P extends z.ZodType>(subject: string, payload: P): EventContract<P> => ({ subject, payload });
