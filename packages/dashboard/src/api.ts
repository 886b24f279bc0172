/**
 * The dashboard's typed client of the public REST API (a generated SDK replaces it later). Every failure is
 * an ApiError carrying the API's code; a 401 on a signed-in call ends the session (onUnauthorized).
 */
export type TierName = 'free' | 'pro' | 'enterprise';
export type InstanceStatus = 'provisioning' | 'running' | 'stopped' | 'failed';

export interface Session {
  token: string;
  wallet_address: string;
  user_id: string;
  expires_at: string;
}
/** The fields of the SIWS message as a wallet's solana:signIn takes them. */
export interface SignInInput {
  domain: string;
  address: string;
  statement: string;
  uri: string;
  version: string;
  chainId: string;
  nonce: string;
  issuedAt: string;
  expirationTime: string;
}
export interface Nonce {
  nonce: string;
  message: string;
  expires_at: string;
  sign_in_input: SignInInput;
}
/** Our message signed as written, or solana:signIn's output (the bytes in base64). */
export type Login =
  | { wallet_address: string; signature_base58: string; nonce: string }
  | { account: { address: string }; signedMessage: string; signature: string };
export interface SubscriptionStatus {
  wallet_address: string;
  tier: TierName;
  is_active: boolean;
  expires_at: string;
  cancelled: boolean;
  instances_used: number;
  instances_limit: number;
  requests_today: number;
  requests_limit: number;
  storage_used_mb: number;
  storage_limit_mb: number;
}
export interface Instance {
  instance_id: string;
  name: string;
  status: InstanceStatus;
  framework: string;
  version: string;
  port: number;
  url: string;
  created_at: string;
  uptime_seconds?: number;
  cpu_usage_percent?: number;
  memory_usage_mb?: number;
  memory_limit_mb?: number;
  failure_reason?: string;
  access_token?: string;
}
export interface UsageMetrics {
  period: string;
  tier: TierName;
  requests: { used: number; limit: number; remaining: number; reset_at: string };
  instances: { active: number; limit: number; remaining: number };
  storage: { used_mb: number; limit_mb: number; remaining_mb: number };
}
export interface KeyEntry {
  key_name: string;
  created_at: string;
  updated_at: string;
}
export interface AuditRecord {
  timestamp: string;
  action: 'key_stored' | 'key_updated' | 'key_deleted' | 'key_retrieved';
  key_name: string;
  key_length: number;
  ip_address: string;
  user_agent: string;
}
export interface KeyChange {
  success: boolean;
  applied: boolean;
  reason?: string;
}

export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  readonly retryAfter: number | undefined;
  constructor(code: string, status: number, message: string, retryAfter?: number) {
    super(message);
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

export interface ApiOptions {
  base?: string;
  token: () => string | undefined;
  onUnauthorized: (err: ApiError) => void;
}

export function apiClient(o: ApiOptions) {
  const base = o.base ?? '/api';
  async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const token = o.token();
    const res = await fetch(base + path, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    // biome-ignore lint/suspicious/noExplicitAny: an answer or an error body, read by field below before it is typed as T
    let parsed: any = {};
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      parsed = { error: text };
    }
    if (res.ok) return parsed as T;
    const retry = Number(res.headers.get('retry-after')) || undefined;
    const err = new ApiError(String(parsed.code ?? 'INTERNAL'), res.status, String(parsed.error ?? res.statusText), retry);
    if (res.status === 401 && token) o.onUnauthorized(err);
    throw err;
  }
  const q = encodeURIComponent;
  return {
    nonce: (wallet: string) => call<Nonce>('GET', `/auth/nonce?wallet_address=${q(wallet)}`),
    login: (b: Login) => call<Session>('POST', '/auth/login', b),
    logout: () => call<{ success: boolean }>('POST', '/auth/logout'),
    subscription: () => call<SubscriptionStatus>('GET', '/subscription/status'),
    register: (tx_signature: string, tier: 0 | 1 | 2) => call<{ success: boolean; tx_verified: boolean }>('POST', '/subscription/register', { tx_signature, tier }),
    refresh: () => call<SubscriptionStatus>('POST', '/subscription/refresh'),
    usage: () => call<UsageMetrics>('GET', '/usage/metrics'),
    instances: () => call<{ instances: Instance[] }>('GET', '/instance/list'),
    instance: (id: string) => call<Instance>('GET', `/instance/status/${q(id)}`),
    create: (name?: string) => call<Instance>('POST', '/instance/create', { framework: 'openclaw', ...(name ? { name } : {}) }),
    lifecycle: (action: 'stop' | 'start' | 'restart', id: string) => call<{ status: InstanceStatus; access_token?: string }>('POST', `/instance/${action}/${q(id)}`),
    remove: (id: string) => call<{ success: boolean }>('DELETE', `/instance/delete/${q(id)}`),
    logs: (id: string, tail = 100) => call<{ lines: string[] }>('GET', `/instance/logs/${q(id)}?tail=${tail}`),
    keys: (id: string) => call<{ keys: KeyEntry[] }>('GET', `/keys/list?instance_id=${q(id)}`),
    audit: (id: string) => call<{ records: AuditRecord[] }>('GET', `/keys/audit?instance_id=${q(id)}&limit=50`),
    storeKey: (id: string, name: string, value: string) => call<KeyChange>('POST', '/keys/store', { instance_id: id, keys: { [name]: value } }),
    updateKey: (id: string, name: string, value: string) => call<KeyChange>('PUT', '/keys/update', { instance_id: id, key_name: name, key_value: value }),
    deleteKey: (id: string, name: string) => call<KeyChange>('DELETE', '/keys/delete', { instance_id: id, key_names: [name] }),
  };
}
export type Api = ReturnType<typeof apiClient>;
