import { children, counter, endSpan, histogram, ROOT_CONTEXT, sampleRoot, SpanKind, trace, tracer, type Context, type Span } from '@agenthost/shared';

// The gateway's HTTP metrics and span, in one place so they follow the router wherever it goes.
// Labels: the route pattern (/instances/:id, never the id itself), the method and the status code.
const requests = counter('agenthost_http_requests_total', 'API requests answered, by route pattern, method and status', ['route', 'method', 'status']);
const seconds = histogram('agenthost_http_request_duration_seconds', 'Time to answer an API request, by route pattern and method', ['route', 'method']);
const requestChild = children((route, method, status) => requests.labels(route!, method!, status!));
const secondsChild = children((route, method) => seconds.labels(route!, method!));

/**
 * The span of one API request, the root of its trace, when this request is sampled (undefined otherwise: an
 * untraced request makes no span anywhere). A traceparent sent by the client is not followed, so a caller cannot
 * make every request of theirs sampled (or pose as part of another trace).
 */
export function startHttpSpan(method: string, requestId: string): { span: Span; ctx: Context } | undefined {
  if (!sampleRoot()) return undefined;
  const span = tracer.startSpan(
    `HTTP ${method}`,
    { kind: SpanKind.SERVER, root: true, attributes: { 'http.request.method': method, 'agenthost.request_id': requestId } },
    ROOT_CONTEXT,
  );
  return { span, ctx: trace.setSpan(ROOT_CONTEXT, span) };
}

/** Count an answered request, end its span, and return the trace id for the access log (when traced). */
export function observeRequest(span: Span | undefined, route: string, method: string, status: number, elapsedSeconds: number): string | undefined {
  requestChild(route, method, String(status)).inc();
  secondsChild(route, method).observe(elapsedSeconds);
  if (!span) return undefined;
  const traceId = span.isRecording() ? span.spanContext().traceId : undefined;
  span.updateName(`${method} ${route}`);
  span.setAttribute('http.route', route);
  span.setAttribute('http.response.status_code', status);
  endSpan(span, status >= 500 ? { code: String(status) } : undefined);
  return traceId;
}
