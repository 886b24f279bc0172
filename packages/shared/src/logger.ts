import { pino, type Logger } from 'pino';

export type { Logger };

// Paths that may carry secrets anywhere in a log object. pino replaces them with "[redacted]".
const REDACT = [
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'signature',
  '*.signature',
  'signature_base58',
  '*.signature_base58',
  'secret',
  '*.secret',
  'instance_secret',
  '*.instance_secret',
  'headers["x-instance-secret"]',
  '*.headers["x-instance-secret"]',
  'password',
  '*.password',
  'key_value',
  '*.key_value',
  'keys',
  '*.keys',
  'private_key',
  '*.private_key',
  'instance_key',
  '*.instance_key',
  'master_key',
  '*.master_key',
  'access_token',
  '*.access_token',
];

/** file: write there instead of stdout (a benchmark's process whose stdout is a pipe nobody reads). */
export function createLogger(service: string, level = 'info', file?: string): Logger {
  return pino(
    {
      level,
      base: { service, pid: process.pid },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    file ? pino.destination({ dest: file, sync: false }) : stdout(),
  );
}

let destination: ReturnType<typeof pino.destination> | undefined;

/**
 * One asynchronous stdout stream for every logger of the process: a per-request log line must not block the
 * event loop (the gateway logs every request), and loggers sharing one buffer never interleave partial lines.
 * pino flushes what is buffered when the process exits.
 */
function stdout(): ReturnType<typeof pino.destination> {
  destination ??= pino.destination({ dest: 1, sync: false });
  return destination;
}

/** The only way a key value may appear in a log: its last four characters. */
export function keyHint(value: string): string {
  return value.length <= 4 ? '****' : `…${value.slice(-4)}`;
}
