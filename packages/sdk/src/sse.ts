/** One server-sent event as parsed from the wire (comment lines are heartbeats and are skipped). */
export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/**
 * Parses a text/event-stream body (a fetch Response's ReadableStream, so it runs in browsers and Node alike; the
 * browser's EventSource cannot send the Authorization header). Ends when the body ends. The one parser of the
 * project: the cli and the gateway's tests read streams with it too. `onComment` sees each comment line (a heartbeat).
 */
export async function* parseSse(body: ReadableStream<Uint8Array>, signal?: AbortSignal, onComment?: (text: string) => void): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const stop = () => void reader.cancel().catch(() => undefined);
  signal?.addEventListener('abort', stop, { once: true });
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const msg: SseMessage = { event: 'message', data: '' };
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) onComment?.(line.slice(1).trim());
          if (line === '' || line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') msg.id = value;
          else if (field === 'event') msg.event = value;
          else if (field === 'data') data.push(value);
        }
        if (data.length === 0) continue;
        msg.data = data.join('\n');
        yield msg;
      }
    }
  } finally {
    signal?.removeEventListener('abort', stop);
    stop();
  }
}
