/**
 * Docker multiplexes stdout/stderr of a container without a TTY into frames:
 * [stream type (1 byte), 0, 0, 0, payload length (uint32 BE)] + payload.
 * Returns the text of all frames (or the buffer as text when it is not multiplexed).
 */
export function demux(buf: Buffer): string {
  const out: Buffer[] = [];
  let i = 0;
  while (i + 8 <= buf.length) {
    const type = buf[i]!;
    if (type > 2 || buf[i + 1] !== 0 || buf[i + 2] !== 0 || buf[i + 3] !== 0) return buf.toString('utf8'); // not multiplexed
    const len = buf.readUInt32BE(i + 4);
    out.push(buf.subarray(i + 8, Math.min(buf.length, i + 8 + len)));
    i += 8 + len;
  }
  return Buffer.concat(out).toString('utf8');
}

/** The last n lines of the text, without the trailing empty line. */
export function lastLines(text: string, n: number): string[] {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.slice(-n).map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
}
