import { describe, expect, it } from 'vitest';
import { LineReader, sinceOf } from '../src/docker/log-follow.ts';

// The ids of a log follow (GET /instance/logs?follow=true): lines that share a docker timestamp are told apart, so a
// resume after one of them neither repeats nor skips its neighbours.

/** A docker frame of stdout, as the logs API sends it for a container without a TTY. */
const frame = (text: string) => {
  const body = Buffer.from(text);
  const head = Buffer.alloc(8);
  head[0] = 1;
  head.writeUInt32BE(body.length, 4);
  return Buffer.concat([head, body]);
};

const TS = '2026-11-23T20:43:34.123456789Z';
const LATER = '2026-11-23T20:43:35.000000001Z';
const log = [frame(`${TS} a\n${TS} b\n`), frame(`${TS} c\n${LATER} d\n`)];

describe('log follow ids', () => {
  it('numbers the lines of one timestamp, and a resume after the second gets the rest once', () => {
    const all = new LineReader().feed(Buffer.concat(log));
    expect(all).toEqual([
      { id: TS, text: 'a' },
      { id: `${TS}~1`, text: 'b' },
      { id: `${TS}~2`, text: 'c' },
      { id: LATER, text: 'd' },
    ]);
    // docker's `since` is inclusive: the resumed stream starts with the lines of that timestamp again.
    const resumed = new LineReader(`${TS}~1`);
    expect([...resumed.feed(log[0]!.subarray(0, 11)), ...resumed.feed(log[0]!.subarray(11)), ...resumed.feed(log[1]!)].map((l) => l.text)).toEqual(['c', 'd']);
    expect(sinceOf(TS)).toBe(`${Date.parse('2026-11-23T20:43:34Z') / 1000}.123456789`);
    expect(sinceOf('2026-11-23T20:43:34.5Z')).toBe(`${Date.parse('2026-11-23T20:43:34Z') / 1000}.500000000`);
  });
});
