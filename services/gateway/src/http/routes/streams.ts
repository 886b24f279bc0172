import type { GatewayContext } from '../../context.ts';
import type { StreamOwner } from '../../domain/stream-slots.ts';

/** A long-lived stream's slot under the caps, and its lifetime. */
export interface HeldStream {
  /** What ends the stream when its lifetime is over (cleanly: the client resumes with Last-Event-ID). */
  expire(end: () => void): void;
  /** Frees the slot (and the lifetime's timer) when the stream is over, however it ended. */
  release(): void;
}

/**
 * Takes the stream's slot (429 RATE_LIMITED with Retry-After over the user's or the instance's cap, before any
 * header is sent) and starts its lifetime: no stream holds a slot, a log stream or a reader longer than
 * STREAM_MAX_SECONDS (or `lifetimeSeconds`), however quiet or slow its client.
 */
export async function holdStream(ctx: GatewayContext, owner: StreamOwner, lifetimeSeconds = ctx.config.STREAM_MAX_SECONDS): Promise<HeldStream> {
  const free = await ctx.streamSlots.take(owner);
  let end: (() => void) | undefined;
  const timer = setTimeout(() => end?.(), lifetimeSeconds * 1000);
  return {
    expire: (fn) => {
      end = fn;
    },
    release: () => {
      clearTimeout(timer);
      free();
    },
  };
}
