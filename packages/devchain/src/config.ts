import { createHash } from 'node:crypto';
import { Keypair } from '@solana/web3.js';
import { b58decode, b58encode } from './encoding.ts';

/** Deterministic keypair from a text seed (sha256 of the text is the Ed25519 seed). */
export function keypairFromLabel(label: string): Keypair {
  return Keypair.fromSeed(new Uint8Array(createHash('sha256').update(label, 'utf8').digest()));
}

/**
 * Default program id: public key of the Ed25519 seed sha256("agenthost-subscription-program")
 * = EqK6CaU83SyiQm2uYrAZqd1SrZQbpYdR4xo6Y2jUZ3qc (asserted in the tests).
 */
export const DEFAULT_PROGRAM_ID = keypairFromLabel('agenthost-subscription-program').publicKey.toBase58();
/** Default treasury: public key of sha256("agenthost-devchain-treasury") = 9ByboyXFDxrujfT1dkQLjEZ611YAz8ipAUESCDvQvuUC. */
export const DEFAULT_TREASURY = keypairFromLabel('agenthost-devchain-treasury').publicKey.toBase58();

export interface Prices {
  free: number;
  pro: number;
  enterprise: number;
}

export interface DevchainConfig {
  host: string;
  /** 0 = pick a free port (and a free port+1 for the WebSocket alias). */
  port: number;
  programId: string;
  treasury: string;
  /** Lamports per 30-day period. */
  prices: Prices;
  slotMs: number;
  finalizeSlots: number;
  /** Slots in an epoch (no warmup): 432,000 as on mainnet; a test may shorten it to reach later epochs. */
  slotsPerEpoch: number;
  /** Seconds between performance samples (getRecentPerformanceSamples): 60 as agave. */
  perfSampleSeconds: number;
  /** Enables the devchain_* JSON-RPC methods. */
  devMethods: boolean;
  /**
   * Also serve (WebSocket and JSON-RPC) on port+1, because @solana/web3.js derives its
   * WebSocket URL from an http URL with an explicit port by adding 1 (agave's convention).
   */
  wsPortAlias: boolean;
}

export const DEFAULT_CONFIG: DevchainConfig = {
  host: '127.0.0.1',
  port: 8899,
  programId: DEFAULT_PROGRAM_ID,
  treasury: DEFAULT_TREASURY,
  prices: { free: 0, pro: 100_000_000, enterprise: 500_000_000 },
  slotMs: 100,
  finalizeSlots: 3,
  slotsPerEpoch: 432_000,
  perfSampleSeconds: 60,
  devMethods: true,
  wsPortAlias: true,
};

const MAX_LAMPORTS = 1_000_000_000_000_000; // 1e15 (1M SOL) keeps every sum below 2^53

export type DevchainOptions = Partial<Omit<DevchainConfig, 'prices'>> & { prices?: Partial<Prices> };

function isPubkey(s: unknown): s is string {
  if (typeof s !== 'string') return false;
  const b = b58decode(s);
  return b !== null && b.length === 32;
}

function intIn(v: unknown, min: number, max: number): boolean {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max;
}

/** Merges options over the defaults and validates; returns every problem found. */
export function resolveConfig(opts: DevchainOptions): { config: DevchainConfig; errors: string[] } {
  const config: DevchainConfig = {
    ...DEFAULT_CONFIG,
    ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)),
    prices: { ...DEFAULT_CONFIG.prices, ...Object.fromEntries(Object.entries(opts.prices ?? {}).filter(([, v]) => v !== undefined)) },
  } as DevchainConfig;
  const errors: string[] = [];
  if (typeof config.host !== 'string' || config.host.length === 0) errors.push('host: must be a non-empty string');
  if (!intIn(config.port, 0, 65535)) errors.push(`port: must be an integer 0..65535, got ${String(config.port)}`);
  if (config.wsPortAlias && config.port === 65535) errors.push('port: 65535 leaves no port+1 for the WebSocket alias');
  if (!isPubkey(config.programId)) errors.push(`programId: not a base58 32-byte public key: ${String(config.programId)}`);
  else config.programId = b58encode(b58decode(config.programId) as Uint8Array);
  if (!isPubkey(config.treasury)) errors.push(`treasury: not a base58 32-byte public key: ${String(config.treasury)}`);
  else config.treasury = b58encode(b58decode(config.treasury) as Uint8Array);
  if (config.programId === config.treasury) errors.push('treasury: must differ from programId');
  for (const tier of ['free', 'pro', 'enterprise'] as const) {
    if (!intIn(config.prices[tier], 0, MAX_LAMPORTS)) {
      errors.push(`prices.${tier}: must be an integer number of lamports 0..${MAX_LAMPORTS}, got ${String(config.prices[tier])}`);
    }
  }
  if (!intIn(config.slotMs, 10, 60_000)) errors.push(`slotMs: must be an integer 10..60000, got ${String(config.slotMs)}`);
  if (!intIn(config.finalizeSlots, 0, 1000)) errors.push(`finalizeSlots: must be an integer 0..1000, got ${String(config.finalizeSlots)}`);
  // 32 is agave's MINIMUM_SLOTS_PER_EPOCH.
  if (!intIn(config.slotsPerEpoch, 32, 100_000_000)) errors.push(`slotsPerEpoch: must be an integer 32..100000000, got ${String(config.slotsPerEpoch)}`);
  if (!intIn(config.perfSampleSeconds, 1, 3600)) errors.push(`perfSampleSeconds: must be an integer 1..3600, got ${String(config.perfSampleSeconds)}`);
  if (typeof config.devMethods !== 'boolean') errors.push('devMethods: must be a boolean');
  if (typeof config.wsPortAlias !== 'boolean') errors.push('wsPortAlias: must be a boolean');
  return { config, errors };
}

type Env = Record<string, string | undefined>;

/** Reads DEVCHAIN_* environment variables; returns every problem found. */
export function configFromEnv(env: Env): { config: DevchainConfig; errors: string[] } {
  const errors: string[] = [];
  const int = (name: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    if (!/^\d+$/.test(raw.trim())) {
      errors.push(`${name}: must be a non-negative integer, got ${JSON.stringify(raw)}`);
      return undefined;
    }
    return Number(raw.trim());
  };
  const bool = (name: string): boolean | undefined => {
    const raw = env[name]?.trim().toLowerCase();
    if (raw === undefined || raw === '') return undefined;
    if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
    if (['0', 'false', 'no', 'off'].includes(raw)) return false;
    errors.push(`${name}: must be true or false, got ${JSON.stringify(env[name])}`);
    return undefined;
  };
  const str = (name: string): string | undefined => {
    const raw = env[name]?.trim();
    return raw === undefined || raw === '' ? undefined : raw;
  };
  const opts: DevchainOptions = {
    host: str('DEVCHAIN_HOST'),
    port: int('DEVCHAIN_PORT'),
    programId: str('DEVCHAIN_PROGRAM_ID'),
    treasury: str('DEVCHAIN_TREASURY'),
    prices: { free: int('DEVCHAIN_PRICE_FREE'), pro: int('DEVCHAIN_PRICE_PRO'), enterprise: int('DEVCHAIN_PRICE_ENTERPRISE') },
    slotMs: int('DEVCHAIN_SLOT_MS'),
    finalizeSlots: int('DEVCHAIN_FINALIZE_SLOTS'),
    slotsPerEpoch: int('DEVCHAIN_SLOTS_PER_EPOCH'),
    perfSampleSeconds: int('DEVCHAIN_PERF_SAMPLE_SECONDS'),
    devMethods: bool('DEVCHAIN_DEV_METHODS'),
    wsPortAlias: bool('DEVCHAIN_WS_PORT_ALIAS'),
  };
  const resolved = resolveConfig(opts);
  const envName: Record<string, string> = {
    host: 'DEVCHAIN_HOST',
    port: 'DEVCHAIN_PORT',
    programId: 'DEVCHAIN_PROGRAM_ID',
    treasury: 'DEVCHAIN_TREASURY',
    'prices.free': 'DEVCHAIN_PRICE_FREE',
    'prices.pro': 'DEVCHAIN_PRICE_PRO',
    'prices.enterprise': 'DEVCHAIN_PRICE_ENTERPRISE',
    slotMs: 'DEVCHAIN_SLOT_MS',
    finalizeSlots: 'DEVCHAIN_FINALIZE_SLOTS',
    slotsPerEpoch: 'DEVCHAIN_SLOTS_PER_EPOCH',
    perfSampleSeconds: 'DEVCHAIN_PERF_SAMPLE_SECONDS',
  };
  const renamed = resolved.errors.map((e) => {
    const key = e.slice(0, e.indexOf(':'));
    return envName[key] ? envName[key] + e.slice(key.length) : e;
  });
  return { config: resolved.config, errors: [...errors, ...renamed] };
}
