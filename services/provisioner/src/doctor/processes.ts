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
export async function processFindings(conf: string | undefined): Promise<{ drift: Finding[]; notes: Finding[] }> {
  const found = { drift: [] as Finding[], notes: [] as Finding[] };
  if (!conf || !existsSync(conf)) return found;
  // `status` exits non-zero whenever a program is not running; its output is still the table.
  const out = await run('supervisorctl', ['-c', conf, 'status']).then(
    (r) => r.stdout,
    (e: { stdout?: string }) => e.stdout ?? '',
  );
  for (const line of out.split('\n')) {
    const m = /^(\S+)\s+([A-Z]+)\s*(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, name, state, detail] = m as unknown as [string, string, string, string];
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
