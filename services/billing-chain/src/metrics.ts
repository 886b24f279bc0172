import { children, counter, gauge, histogram, inSpan } from '@agenthost/shared';

// billing-chain's view of the chain: JSON-RPC calls by method (Solana's fixed method names) and outcome, and
// how far behind the chain's clock is. No wallet or signature labels.

const calls = counter('agenthost_chain_rpc_calls_total', 'Solana JSON-RPC calls, by method and outcome (ok, error: an RPC error answered, failed: no answer)', [
  'method',
  'outcome',
]);
const seconds = histogram('agenthost_chain_rpc_duration_seconds', 'Time of a Solana JSON-RPC call, by method', ['method']);
const callChild = children((method, outcome) => calls.labels(method!, outcome!));
const secondsChild = children((method) => seconds.labels(method!));

/**
 * web3.js's fetch: every JSON-RPC call passes here, so each is counted by method and is a span of the request it
 * serves; a call that takes longer than timeoutMs is aborted (an unreachable chain is a fast 503).
 */
export function observedFetch(timeoutMs: number): (input: unknown, init?: unknown) => Promise<Response> {
  return (input, init) => {
    const method = rpcMethod((init as RequestInit | undefined)?.body);
    const started = performance.now();
    return inSpan(`solana ${method}`, { 'rpc.system': 'jsonrpc', 'rpc.method': method }, () =>
      fetch(input as string, { ...(init as RequestInit), signal: AbortSignal.timeout(timeoutMs) }),
    ).then(
      (res) => (observeRpc(method, res.ok ? 'ok' : 'error', (performance.now() - started) / 1000), res),
      (err: unknown) => {
        observeRpc(method, 'failed', (performance.now() - started) / 1000);
        throw err;
      },
    );
  };
}

/** The JSON-RPC method of a request body (one call, or the first of a batch); 'other' when unreadable. */
function rpcMethod(body: unknown): string {
  const m = typeof body === 'string' ? /"method"\s*:\s*"([A-Za-z_]{1,64})"/.exec(body) : null;
  return m?.[1] ?? 'other';
}

function observeRpc(method: string, outcome: 'ok' | 'error' | 'failed', elapsedSeconds: number): void {
  callChild(method, outcome).inc();
  secondsChild(method).observe(elapsedSeconds);
}

let clock: (() => { offsetMs: number; readAt: number }) | undefined;

/** Chain lag, read from the chain client when scraped (the latest client of the process). */
export function chainClock(read: () => { offsetMs: number; readAt: number }): void {
  clock = read;
}

gauge(
  'agenthost_chain_clock_offset_seconds',
  'Chain time minus local time at the last reading (negative: the latest block at our commitment trails the wall clock)',
  [],
  function () {
    if (clock) this.set(clock().offsetMs / 1000);
  },
);
gauge(
  'agenthost_chain_clock_age_seconds',
  'Seconds since the chain clock was last read successfully (grows while the RPC node does not answer)',
  [],
  function () {
    const at = clock?.().readAt;
    if (at) this.set((Date.now() - at) / 1000);
  },
);
