import { describe, expect, it } from 'vitest';
import { pinnedNode, pinTo, writeAtVersion } from '../src/swarm.ts';

describe('swarm vocabulary', () => {
  it('pins to a node and reads the pin back, whatever the spacing', () => {
    expect(pinnedNode([pinTo('abc123')])).toBe('abc123');
    expect(pinnedNode(['node.role == manager', 'node.id==xyz'])).toBe('xyz');
    expect(pinnedNode(['node.role == manager'])).toBeUndefined();
    expect(pinnedNode(undefined)).toBeUndefined();
  });

  it('writes again at the new version when the swarm wrote in between, also when the error wraps the engine’s', async () => {
    let version = 1;
    const written: number[] = [];
    const outOfSequence = [
      new Error('(HTTP code 500) server error - rpc error: code = Unknown desc = update out of sequence'),
      new Error('engine unavailable', { cause: new Error('update out of sequence') }),
    ];
    const ok = await writeAtVersion(
      async () => ({ version, spec: { replicas: 1 } }),
      async (v, spec) => {
        const err = outOfSequence.shift();
        version++;
        if (err) throw err;
        written.push(v, spec.replicas);
      },
      (spec) => ({ replicas: spec.replicas + 1 }),
    );
    expect(ok).toBe(true);
    expect(written).toEqual([3, 2]);
  });

  it('gives up after five tries, rethrows any other error at once, and writes nothing for a missing object or no change', async () => {
    let tries = 0;
    const conflict = () =>
      writeAtVersion(
        async () => ({ version: 1, spec: {} }),
        async () => {
          tries++;
          throw new Error('update out of sequence');
        },
        (s) => s,
      );
    await expect(conflict()).rejects.toThrow(/out of sequence/);
    expect(tries).toBe(5);
    tries = 0;
    await expect(
      writeAtVersion(
        async () => ({ version: 1, spec: {} }),
        async () => {
          tries++;
          throw new Error('invalid spec');
        },
        (s) => s,
      ),
    ).rejects.toThrow(/invalid spec/);
    expect(tries).toBe(1);
    expect(
      await writeAtVersion(
        async () => undefined,
        async () => {
          tries++;
        },
        (s) => s,
      ),
    ).toBe(false);
    expect(
      await writeAtVersion(
        async () => ({ version: 1, spec: {} }),
        async () => {
          tries++;
        },
        () => undefined,
      ),
    ).toBe(true);
    expect(tries).toBe(1);
  });
});
