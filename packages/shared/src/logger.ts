import { pino, type Logger } from 'pino';

export type { Logger };

// Paths that may carry secrets anywhere in a log object. pino replaces them with "[redacted]".
const REDACT = [
  'token', '*.token', 'authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization',
  'signature', '*.signature', 'signature_base58', '*.signature_base58',
  'secret', '*.secret', 'instance_secret', '*.instance_secret', 'headers["x-instance-secret"]', '*.headers["x-instance-secret"]',
  'password', '*.password', 'key_value', '*.key_value', 'keys', '*.keys', 'private_key', '*.private_key',
  'instance_key', '*.instance_key', 'master_key', '*.master_key', 'access_token', '*.access_token',
];

export function createLogger(service: string, level = 'info'): Logger {
  return pino(
    {
      level,
      base: { service, pid: process.pid },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    stdout(),
  );
}

export interface AccessEntry {
  request_id: string;
  method: string;
  path: string;
  status: number;
  ms: number;
  user_id?: string | undefined;
  /** The request's trace (when traced): the request id of this line finds its spans. */
  trace_id?: string | undefined;
}

/**
 * A writer of the one-line-per-request access log, in the same JSON shape as every other line
 * ({"level":"info","time":…,"service":…,"pid":…,…,"msg":"request"}) and to the same stream. Its fields are
 * fixed and built by the caller (never headers, bodies or query), so it is written directly: going through
 * pino's generic object serialisation made a sixth of the gateway's per-request garbage.
 */
export function createAccessLog(service: string, level = 'info'): (e: AccessEntry) => void {
  if (!pino.levels.values[level] || pino.levels.values[level]! > pino.levels.values.info!) return () => {};
  const head = `{"level":"info","time":"`;
  const base = `","service":${JSON.stringify(service)},"pid":${process.pid},"request_id":`;
  const out = stdout();
  return (e) => {
    out.write(
      `${head}${new Date().toISOString()}${base}${JSON.stringify(e.request_id)},"method":${JSON.stringify(e.method)},"path":${JSON.stringify(e.path)},"status":${e.status},"ms":${e.ms}${
        e.user_id ? `,"user_id":${JSON.stringify(e.user_id)}` : ''
      }${e.trace_id ? `,"trace_id":"${e.trace_id}"` : ''},"msg":"request"}\n`,
    );
  };
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
