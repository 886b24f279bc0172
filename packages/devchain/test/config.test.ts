import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Connection } from '@solana/web3.js';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PROGRAM_ID, DEFAULT_TREASURY, configFromEnv, startDevchain } from '../src/index.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

describe('configuration from the environment', () => {
  it('uses documented defaults', () => {
    const { config, errors } = configFromEnv({});
    expect(errors).toEqual([]);
    expect(config).toEqual({
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
    });
    expect(DEFAULT_TREASURY).toBe('9ByboyXFDxrujfT1dkQLjEZ611YAz8ipAUESCDvQvuUC');
  });

  it('reads every variable', () => {
    const { config, errors } = configFromEnv({
      DEVCHAIN_PORT: '9000',
      DEVCHAIN_HOST: '0.0.0.0',
      DEVCHAIN_PROGRAM_ID: DEFAULT_TREASURY,
      DEVCHAIN_TREASURY: DEFAULT_PROGRAM_ID,
      DEVCHAIN_PRICE_FREE: '1',
      DEVCHAIN_PRICE_PRO: '2',
      DEVCHAIN_PRICE_ENTERPRISE: '3',
      DEVCHAIN_SLOT_MS: '50',
      DEVCHAIN_FINALIZE_SLOTS: '5',
      DEVCHAIN_SLOTS_PER_EPOCH: '64',
      DEVCHAIN_PERF_SAMPLE_SECONDS: '5',
      DEVCHAIN_DEV_METHODS: 'false',
      DEVCHAIN_WS_PORT_ALIAS: '0',
    });
    expect(errors).toEqual([]);
    expect(config).toMatchObject({
      port: 9000,
      host: '0.0.0.0',
      programId: DEFAULT_TREASURY,
      prices: { free: 1, pro: 2, enterprise: 3 },
      slotMs: 50,
      finalizeSlots: 5,
      slotsPerEpoch: 64,
      perfSampleSeconds: 5,
      devMethods: false,
      wsPortAlias: false,
    });
  });

  it('reports every problem at once', () => {
    const { errors } = configFromEnv({
      DEVCHAIN_PORT: '70000',
      DEVCHAIN_PROGRAM_ID: 'nope',
      DEVCHAIN_PRICE_PRO: '-3',
      DEVCHAIN_SLOT_MS: '1',
      DEVCHAIN_DEV_METHODS: 'maybe',
    });
    expect(errors).toHaveLength(5);
    expect(errors.join('\n')).toMatch(/DEVCHAIN_PORT/);
    expect(errors.join('\n')).toMatch(/DEVCHAIN_PROGRAM_ID/);
    expect(errors.join('\n')).toMatch(/DEVCHAIN_PRICE_PRO/);
    expect(errors.join('\n')).toMatch(/DEVCHAIN_SLOT_MS/);
    expect(errors.join('\n')).toMatch(/DEVCHAIN_DEV_METHODS/);
  });

  it('refuses invalid options in-process', async () => {
    await expect(startDevchain({ port: 0, slotMs: 0 })).rejects.toThrow(/slotMs/);
  });
});

function run(env: Record<string, string>) {
  return spawn(process.execPath, [MAIN], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

describe('devchain process', () => {
  it('prints one JSON line when listening and exits cleanly on SIGTERM', async () => {
    const child = run({ DEVCHAIN_PORT: '0' });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', () => reject(new Error('exited early')));
    });
    const log = JSON.parse(line);
    expect(log.msg).toBe('devchain listening');
    expect(log.programId).toBe(DEFAULT_PROGRAM_ID);
    const conn = new Connection(log.url, 'confirmed');
    expect(typeof (await conn.getSlot())).toBe('number');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('prints every config problem and exits 2', async () => {
    const child = run({ DEVCHAIN_PORT: 'x', DEVCHAIN_TREASURY: 'bad' });
    let stderr = '';
    child.stderr!.on('data', (c) => (stderr += String(c)));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code).toBe(2);
    expect(stderr).toMatch(/DEVCHAIN_PORT/);
    expect(stderr).toMatch(/DEVCHAIN_TREASURY/);
  });
});
