/**
 * One page of a log follow, read from a docker logs stream opened with follow and timestamps. Each line's id is its
 * docker timestamp (nanoseconds), with "~n" for the n-th further line of the same timestamp: docker's `since` is
 * inclusive and whole lines share a timestamp rarely but possibly, so the id names one line exactly and a resume
 * skips what it already has.
 */

export interface LogLine {
  id: string;
  text: string;
}

/** Where a page starts: after the line with this timestamp and repeat count. */
interface Cursor {
  ts: string;
  n: number;
}

const TS = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/;

export function parseId(id: string): Cursor {
  const [ts, n] = id.split('~');
  return { ts: ts!, n: n === undefined ? 0 : Number(n) };
}

/** Docker's `since` query value (seconds.nanoseconds) for a line timestamp. */
export function sinceOf(ts: string): string {
  const m = TS.exec(ts);
  if (!m) throw new Error(`not a docker timestamp: ${ts}`);
  return `${Math.floor(Date.parse(`${m[1]}Z`) / 1000)}.${(m[2] ?? '').padEnd(9, '0')}`;
}

/** Orders two docker timestamps (both RFC 3339 in UTC; fractions compared as nanoseconds). */
function compareTs(a: string, b: string): number {
  const [sa, fa] = [sinceOf(a), sinceOf(b)];
  const [ia, na] = sa.split('.').map(Number) as [number, number];
  const [ib, nb] = fa.split('.').map(Number) as [number, number];
  return ia - ib || na - nb;
}

/**
 * Splits the demultiplexed byte stream into timestamped lines: feed() takes raw docker chunks (8-byte frame headers
 * when the container has no TTY) and returns the complete lines after the cursor.
 */
export class LineReader {
  private frames = Buffer.alloc(0);
  private text = '';
  private last: Cursor | undefined;
  private readonly after: Cursor | undefined;

  constructor(after?: string) {
    this.after = after === undefined ? undefined : parseId(after);
  }

  feed(chunk: Buffer): LogLine[] {
    this.frames = Buffer.concat([this.frames, chunk]);
    const parts: Buffer[] = [];
    while (this.frames.length >= 8) {
      const type = this.frames[0]!;
      if (type > 2 || this.frames[1] !== 0 || this.frames[2] !== 0 || this.frames[3] !== 0) {
        // Not multiplexed (a TTY container): the bytes are the text.
        parts.push(this.frames);
        this.frames = Buffer.alloc(0);
        break;
      }
      const len = this.frames.readUInt32BE(4);
      if (this.frames.length < 8 + len) break;
      parts.push(this.frames.subarray(8, 8 + len));
      this.frames = this.frames.subarray(8 + len);
    }
    this.text += Buffer.concat(parts).toString('utf8');
    const out: LogLine[] = [];
    for (let i = this.text.indexOf('\n'); i >= 0; i = this.text.indexOf('\n')) {
      const raw = this.text.slice(0, i);
      this.text = this.text.slice(i + 1);
      const line = this.line(raw.endsWith('\r') ? raw.slice(0, -1) : raw);
      if (line) out.push(line);
    }
    return out;
  }

  private line(raw: string): LogLine | undefined {
    const space = raw.indexOf(' ');
    const ts = space < 0 ? raw : raw.slice(0, space);
    if (!TS.test(ts)) return undefined; // docker prefixes every line with its timestamp when asked
    const n = this.last?.ts === ts ? this.last.n + 1 : 0;
    this.last = { ts, n };
    if (this.after) {
      const c = compareTs(ts, this.after.ts);
      if (c < 0 || (c === 0 && n <= this.after.n)) return undefined;
    }
    return { id: n === 0 ? ts : `${ts}~${n}`, text: space < 0 ? '' : raw.slice(space + 1) };
  }
}

/** Half of NATS's default 1 MB message limit, for the JSON around the lines. */
const MAX_PAGE_BYTES = 512 * 1024;

/**
 * Reads one page from a follow stream: it waits up to `waitMs` for the first line, then takes what else is already
 * there (up to `limit` lines) and closes the stream. `ended` tells that the stream finished by itself (the
 * container is not running).
 */
export function readPage(stream: NodeJS.ReadableStream, reader: LineReader, limit: number, waitMs: number): Promise<{ lines: LogLine[]; ended: boolean }> {
  const s = stream as NodeJS.ReadableStream & { destroy?: () => void };
  return new Promise((resolve) => {
    const lines: LogLine[] = [];
    let bytes = 0;
    let settled = false;
    let soon: NodeJS.Immediate | undefined;
    const finish = (ended: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (soon) clearImmediate(soon);
      s.removeListener('data', onData);
      s.destroy?.();
      // Within the count and the bytes a NATS message carries; the lines cut off come again on the next page.
      let size = 0;
      let keep = 0;
      while (keep < Math.min(limit, lines.length) && (keep === 0 || size + lines[keep]!.text.length <= MAX_PAGE_BYTES)) size += lines[keep++]!.text.length;
      resolve({ lines: lines.slice(0, keep), ended });
    };
    const onData = (chunk: Buffer | string) => {
      const fresh = reader.feed(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
      lines.push(...fresh);
      for (const l of fresh) bytes += l.text.length;
      if (lines.length >= limit || bytes >= MAX_PAGE_BYTES) return finish(false);
      // What docker has already written arrives in the same turn of the loop: answer once the burst is read.
      if (lines.length > 0 && !soon) soon = setImmediate(() => finish(false));
    };
    const timer = setTimeout(() => finish(false), waitMs);
    s.on('data', onData);
    s.once('end', () => finish(true));
    s.once('close', () => finish(true));
    s.once('error', () => finish(true));
  });
}
