import { describe, expect, it } from 'vitest';
import { nodeFault, staleNetworkRepeated } from '../src/swarm/node-faults.ts';

const STALE = 'network oi2xkcmmccj0l53iw51it7arj exists';
const task = (second: number, err?: string) => ({ UpdatedAt: `2026-12-01T07:00:${String(second).padStart(2, '0')}Z`, Status: err ? { Err: err } : {} });

describe("what a swarm task's refusal says about its node", () => {
  it('reads the engine’s two node faults and nothing else as one', () => {
    expect(nodeFault(STALE)).toBe('stale-network');
    expect(nodeFault('configuration network "agenthost-t-swarm-config" does not exist')).toBe('unprepared');
    expect(nodeFault('task: non-zero exit (1)')).toBeUndefined();
  });

  it('holds the node at fault for stale network state only once three tries in a row were refused for it', () => {
    expect(staleNetworkRepeated([task(1, STALE)])).toBe(false);
    expect(staleNetworkRepeated([task(1, STALE), task(2, STALE)])).toBe(false);
    // Listed in any order: the newest three count, and a task still starting carries no refusal.
    expect(staleNetworkRepeated([task(3, STALE), task(1, STALE), task(4), task(2, STALE)])).toBe(true);
    // The newest refusal was the agent's own exit: the node took that try.
    expect(staleNetworkRepeated([task(1, STALE), task(2, STALE), task(3, STALE), task(4, 'task: non-zero exit (1)')])).toBe(false);
  });
});
