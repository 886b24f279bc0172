import type { ApiResponse } from '@agenthost/testkit';
import { parseSse } from '../../../../packages/sdk/src/sse.ts';

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
  try {
    for await (const m of parseSse(res.body)) return { status: res.status, headers: res.headers, body: JSON.parse(m.data), text: m.data };
  } finally {
    abort.abort();
  }
  return { status: res.status, headers: res.headers, body: undefined, text: '' };
}
