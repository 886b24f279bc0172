import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

// The hook a swarm node runs around its engine (docs/deploy/swarm.md, "A node that crashes"): a start after a clean
// stop keeps the engine's network store; a start after a crash (no clean stop since the last start) sets it aside.
// The swarm suite's crash test shows what the set-aside store repairs; this pins the operator's script itself.

const exec = promisify(execFile);
const hook = path.join(import.meta.dirname, '../node-engine.sh');

it('sets the network store aside only when the engine did not stop cleanly since it last started', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'node-engine-'));
  const store = path.join(root, 'network/files/local-kv.db');
  mkdirSync(path.dirname(store), { recursive: true });
  writeFileSync(store, 'first');
  // The dead engine's sandbox namespaces (on a node, nsfs mounts; here files) go with its store. Never the default
  // /var/run/docker here: that is this machine's own engine.
  const sandbox = path.join(root, 'exec/netns/0123456789ab');
  mkdirSync(path.dirname(sandbox), { recursive: true });
  writeFileSync(sandbox, '');
  const run = (...args: string[]) => exec('bash', [hook, ...args, path.join(root, 'exec')]);

  // First start ever, then a clean stop and a start: the store stays.
  await run('before-start', root);
  await run('after-stop', root);
  await run('before-start', root);
  expect([readFileSync(store, 'utf8'), existsSync(`${store}.unclean`), existsSync(sandbox)]).toEqual(['first', false, true]);

  // No stop before the next start (the engine crashed): set aside, kept for a look, and said so.
  const crashed = await run('before-start', root);
  expect([existsSync(store), readFileSync(`${store}.unclean`, 'utf8'), existsSync(sandbox)]).toEqual([false, 'first', false]);
  expect(crashed.stdout).toMatch(/did not stop cleanly/);

  // The engine made a new store; a clean stop and start keep it.
  writeFileSync(store, 'second');
  await run('after-stop', root);
  await run('before-start', root);
  expect(readFileSync(store, 'utf8')).toBe('second');

  await expect(run('sideways', root)).rejects.toMatchObject({ code: 2 });
});
