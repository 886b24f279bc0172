import type { z } from 'zod';

/** A request/reply contract: one subject, validated input and output at both ends. */
export interface Contract<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  subject: string;
  input: I;
  output: O;
}

export const contract = <I extends z.ZodType, O extends z.ZodType>(subject: string, input: I, output: O): Contract<I, O> => ({
  subject,
  input,
  output,
});

export type In<C extends Contract> = z.input<C['input']>;
export type Out<C extends Contract> = z.output<C['output']>;

/** A domain event on the JetStream stream EVENTS. */
export interface EventContract<P extends z.ZodType = z.ZodType> {
  subject: string;
  payload: P;
}

export const event = <P extends z.ZodType>(subject: string, payload: P): EventContract<P> => ({ subject, payload });
