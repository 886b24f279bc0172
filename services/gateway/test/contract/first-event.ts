import type { ApiResponse } from '@agenthost/testkit';

/**
 * Opens a server-sent event stream and answers its status, headers and first event's data as `body` (an error answer
 * is read whole, as JSON). The connection is dropped after the first event, as a client going away does.
 */
export async function firstEvent(url: string, headers: Record<string, string>): Promise<ApiResponse> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream') || !res.body) {
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON: reported as text */
    }
    return { status: res.status, headers: res.headers, body, text };
  }
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      for (let end = buf.indexOf('\n\n'); end >= 0; end = buf.indexOf('\n\n')) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = block.split('\n').find((l) => l.startsWith('data: '));
        if (data) return { status: res.status, headers: res.headers, body: JSON.parse(data.slice(6)), text: block };
      }
    }
  } finally {
    abort.abort();
  }
  return { status: res.status, headers: res.headers, body: undefined, text: buf };
}
