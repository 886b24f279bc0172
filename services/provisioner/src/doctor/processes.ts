import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import type { Finding } from './checks.ts';

const run = promisify(execFile);

/** supervisord's states that mean a program that should run does not: it keeps dying, or gave up, or died. */
const DOWN = new Set(['BACKOFF', 'FATAL', 'EXITED', 'UNKNOWN']);

/**
 * The processes of a single host (deploy/start.sh: the services, the edge, Postgres, NATS, the Docker engine) as
 * supervisord reports them, when bin/agenthost names its configuration (AGENTHOST_SUPERVISOR_CONF). A program that
 * keeps dying shows BACKOFF: drift, with where to look. One an operator stopped is a note.
 */
/** How long the doctor watches a program that shows STARTING: longer than the longest startsecs in deploy/services.sh. */
const SETTLE_MS = 5_000;
const LOOK_EVERY_MS = 250;

export async function processFindings(conf: string | undefined): Promise<{ drift: Finding[]; notes: Finding[] }> {
  const found = { drift: [] as Finding[], notes: [] as Finding[] };
  if (!conf || !existsSync(conf)) return found;
  for (const [name, { state, detail }] of await settledStates(conf)) {
    if (DOWN.has(state))
      found.drift.push({
        check: 'process',
        problem: `${name} is ${state} under supervisord${detail ? ` (${detail})` : ''}: it ${state === 'BACKOFF' ? 'keeps exiting as it starts' : 'is not running'}`,
        fix: `read the end of its log in the log directory (${name}.log), fix the cause, then: supervisorctl -c ${conf} start ${name}`,
      });
    else if (state === 'STOPPED')
      found.notes.push({ check: 'process', problem: `${name} is stopped (by an operator)`, fix: `supervisorctl -c ${conf} start ${name}` });
  }
  return found;
}

/**
 * Each program's state, looked at again while any shows STARTING: a program in a crash loop spends part of each
 * round STARTING, so a single look can miss it. A down state seen in any look is kept over a later STARTING.
 */
async function settledStates(conf: string): Promise<Map<string, { state: string; detail: string }>> {
  const seen = new Map<string, { state: string; detail: string }>();
  const until = Date.now() + SETTLE_MS;
  for (;;) {
    let starting = false;
    for (const [name, now] of await statusTable(conf)) {
      const wasDown = DOWN.has(seen.get(name)?.state ?? '');
      if (!wasDown || DOWN.has(now.state)) seen.set(name, now);
      // One already seen down needs no more looks.
      starting ||= now.state === 'STARTING' && !wasDown;
    }
    if (!starting || Date.now() >= until) return seen;
    await new Promise((r) => setTimeout(r, LOOK_EVERY_MS));
  }
}

async function statusTable(conf: string): Promise<Map<string, { state: string; detail: string }>> {
  // `status` exits non-zero whenever a program is not running; its output is still the table.
  const out = await run('supervisorctl', ['-c', conf, 'status']).then(
    (r) => r.stdout,
    (e: { stdout?: string }) => e.stdout ?? '',
  );
  const table = new Map<string, { state: string; detail: string }>();
  for (const line of out.split('\n')) {
    const m = /^(\S+)\s+([A-Z]+)\s*(.*)$/.exec(line.trim());
    if (m) table.set(m[1] as string, { state: m[2] as string, detail: m[3] as string });
  }
  return table;
}
