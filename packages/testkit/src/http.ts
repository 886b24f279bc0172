export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export interface ApiClient {
  get<T = any>(path: string, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  put<T = any>(path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  del<T = any>(path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  /** Raw call: body sent as given (string) so tests can send malformed JSON. */
  raw(method: string, path: string, body: string | undefined, headers: Record<string, string>): Promise<ApiResponse>;
  withToken(token: string): ApiClient;
}

/** A small JSON client for the gateway's /api. */
export function apiClient(baseUrl: string, token?: string): ApiClient {
  const raw = async (method: string, path: string, body: string | undefined, headers: Record<string, string>): Promise<ApiResponse> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      body,
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON: tests assert on text */
    }
    return { status: res.status, body: parsed, headers: res.headers, text };
  };
  const json =
    (method: string) =>
    (path: string, body?: unknown, headers: Record<string, string> = {}) =>
      raw(method, path, body === undefined ? undefined : JSON.stringify(body), {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      });
  return {
    get: (path, headers = {}) => raw('GET', path, undefined, headers),
    post: json('POST'),
    put: json('PUT'),
    del: json('DELETE'),
    raw,
    withToken: (t) => apiClient(baseUrl, t),
  };
}
