/** Runs devchain as a process: config from DEVCHAIN_* env, one JSON log line, SIGTERM/SIGINT close cleanly. */
import { configFromEnv, startDevchain } from './index.ts';

const { config, errors } = configFromEnv(process.env);
if (errors.length) {
  for (const e of errors) process.stderr.write(`devchain: invalid config: ${e}\n`);
  process.exit(2);
}

const log = (fields: Record<string, unknown>) => process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...fields })}\n`);

try {
  const chain = await startDevchain(config);
  const c = chain.config;
  log({
    msg: 'devchain listening',
    url: chain.url,
    wsUrl: chain.wsUrl,
    wsAliasUrl: chain.wsAliasUrl,
    programId: c.programId,
    treasury: c.treasury,
    prices: c.prices,
    slotMs: c.slotMs,
    finalizeSlots: c.finalizeSlots,
    devMethods: c.devMethods,
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    chain.close().then(
      () => {
        log({ msg: 'devchain stopped', signal });
        process.exit(0);
      },
      (e: unknown) => {
        process.stderr.write(`devchain: error while closing: ${String(e)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
} catch (e) {
  process.stderr.write(`devchain: failed to start: ${(e as Error).message}\n`);
  process.exit(1);
}
