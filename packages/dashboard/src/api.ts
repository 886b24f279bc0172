import { createAgenthost } from '@agenthost/sdk';

/**
 * The dashboard's calls of the public REST API, made with the generated SDK (packages/sdk). Every failure is
 * an ApiError carrying the API's code; a 401 on a signed-in call ends the session (onUnauthorized).
 */
export type TierName = 'free' | 'pro' | 'enterprise';
/** sleeping: idle, frozen or its container stopped by the provisioner (sleep_depth); the first request to its URL wakes it. */
export type InstanceStatus = 'provisioning' | 'running' | 'stopped' | 'failed' | 'sleeping';

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
  /** sleeping: frozen, swapped (both wake in about a second) or stopped (wakes by booting). */
  sleep_depth?: 'frozen' | 'swapped' | 'checkpointed' | 'stopped';
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

/** A browser or app of an OpenClaw instance: waiting for its owner's approval, or paired. */
export interface Device {
  request_id?: string;
  device_id?: string;
  name?: string;
  platform?: string;
  client?: string;
  remote_ip?: string;
  at?: string;
}

export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  readonly retryAfter: number | undefined;
  /** What the user can do about it, when the page knows more than the API said (e.g. where to sign in). */
  hint?: string;
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

type Answer = { data?: unknown; error?: unknown; response: Response };

export function apiClient(o: ApiOptions) {
  const sdk = createAgenthost({ baseUrl: o.base ?? '/api', token: o.token });
  const { api } = sdk;
  /** The answer's data, or an ApiError with the API's code (a 401 on a signed-in call ends the session). */
  async function call<T>(pending: Promise<Answer>): Promise<T> {
    const token = o.token();
    const r = await pending;
    if (r.response.ok) return r.data as T;
    const body = (r.error && typeof r.error === 'object' ? r.error : { error: String(r.error ?? '') }) as { code?: string; error?: string };
    const retry = Number(r.response.headers.get('retry-after')) || undefined;
    const err = new ApiError(String(body.code ?? 'INTERNAL'), r.response.status, String(body.error || r.response.statusText), retry);
    if (r.response.status === 401 && token) o.onUnauthorized(err);
    throw err;
  }
  const path = (instanceId: string) => ({ params: { path: { instanceId } } });
  return {
    nonce: (wallet: string) => call<Nonce>(api.GET('/auth/nonce', { params: { query: { wallet_address: wallet } } })),
    login: (b: Login) => call<Session>(api.POST('/auth/login', { body: b })),
    logout: () => call<{ success: boolean }>(api.POST('/auth/logout')),
    subscription: () => call<SubscriptionStatus>(api.GET('/subscription/status')),
    register: (tx_signature: string, tier: 0 | 1 | 2) =>
      call<{ success: boolean; tx_verified: boolean }>(api.POST('/subscription/register', { body: { tx_signature, tier } })),
    refresh: () => call<SubscriptionStatus>(api.POST('/subscription/refresh')),
    usage: () => call<UsageMetrics>(api.GET('/usage/metrics')),
    instances: () => call<{ instances: Instance[] }>(api.GET('/instance/list')),
    instance: (id: string) => call<Instance>(api.GET('/instance/status/{instanceId}', path(id))),
    create: (name?: string) => call<Instance>(api.POST('/instance/create', { body: { framework: 'openclaw', ...(name ? { name } : {}) } })),
    lifecycle: (action: 'stop' | 'start' | 'restart', id: string) =>
      call<{ status: InstanceStatus; access_token?: string }>(
        action === 'stop'
          ? api.POST('/instance/stop/{instanceId}', path(id))
          : action === 'start'
            ? api.POST('/instance/start/{instanceId}', path(id))
            : api.POST('/instance/restart/{instanceId}', path(id)),
      ),
    remove: (id: string) => call<{ success: boolean }>(api.DELETE('/instance/delete/{instanceId}', path(id))),
    logs: (id: string, tail = 100) =>
      call<{ lines: string[] }>(api.GET('/instance/logs/{instanceId}', { params: { path: { instanceId: id }, query: { tail } } })),
    keys: (id: string) => call<{ keys: KeyEntry[] }>(api.GET('/keys/list', { params: { query: { instance_id: id } } })),
    audit: (id: string) => call<{ records: AuditRecord[] }>(api.GET('/keys/audit', { params: { query: { instance_id: id, limit: 50 } } })),
    storeKey: (id: string, name: string, value: string) => call<KeyChange>(api.POST('/keys/store', { body: { instance_id: id, keys: { [name]: value } } })),
    updateKey: (id: string, name: string, value: string) =>
      call<KeyChange>(api.PUT('/keys/update', { body: { instance_id: id, key_name: name, key_value: value } })),
    deleteKey: (id: string, name: string) => call<KeyChange>(api.DELETE('/keys/delete', { body: { instance_id: id, key_names: [name] } })),
    devices: (id: string) => call<{ pending: Device[]; paired: Device[] }>(api.GET('/instance/devices/{instanceId}', path(id))),
    decideDevice: (id: string, request_id: string, decision: 'approve' | 'reject') =>
      call<{ success: boolean }>(
        decision === 'approve'
          ? api.POST('/instance/devices/approve/{instanceId}', { ...path(id), body: { request_id } })
          : api.POST('/instance/devices/reject/{instanceId}', { ...path(id), body: { request_id } }),
      ),
    /** The instance's lifecycle events (GET /instance/events over fetch, with the session header), resumed after drops. */
    events: (id: string, signal: AbortSignal) => sdk.events(id, { signal }),
  };
}
export type Api = ReturnType<typeof apiClient>;
