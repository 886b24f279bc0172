import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@agenthost/testkit';
import { processFindings } from '../src/doctor/processes.ts';

// The doctor's view of a single host's processes, from a real supervisord (as deploy/start.sh runs them): a program in
// a crash loop is drift naming it and its fix, one an operator stopped is a note, one running is nothing.

const run = promisify(execFile);
const dir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-doctor-sv-'));
const conf = path.join(dir, 'supervisord.conf');
const status = async () => (await run('supervisorctl', ['-c', conf, 'status']).catch((e: { stdout: string }) => e)).stdout;

beforeAll(async () => {
  const program = (name: string, command: string, autostart = true) =>
    `[program:${name}]\ncommand=${command}\nautostart=${autostart}\nstartsecs=2\nstartretries=1000000\nstdout_logfile=${dir}/${name}.log\nredirect_stderr=true\n`;
  writeFileSync(
    conf,
    [
      `[unix_http_server]\nfile=${dir}/sv.sock\n`,
      `[supervisord]\nlogfile=${dir}/supervisord.log\npidfile=${dir}/supervisord.pid\nnodaemon=true\n`,
      '[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n',
      `[supervisorctl]\nserverurl=unix://${dir}/sv.sock\n`,
      // Like a server that fails on its configuration: it runs a moment, then exits.
      program('postgres', 'bash -c "sleep 0.9; exit 1"'),
      program('gateway', 'sleep 600'),
      program('prometheus', 'sleep 600', false),
    ].join('\n'),
  );
  spawn('supervisord', ['-c', conf], { stdio: 'ignore', detached: true }).unref();
  await waitFor(
    'postgres in a crash loop, the gateway running',
    async () => /postgres\s+BACKOFF/.test(await status()) && /gateway\s+RUNNING/.test(await status()),
    30_000,
    200,
  );
});

afterAll(async () => {
  await run('supervisorctl', ['-c', conf, 'shutdown']).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

describe('agenthost doctor on a host run by supervisord', () => {
  it('reports a program in a crash loop as drift with its fix, a stopped one as a note, and nothing of one running', async () => {
    // Looked at while the crash loop shows STARTING: one look at that moment alone would miss it.
    await waitFor('postgres STARTING again', async () => /postgres\s+STARTING/.test(await status()), 30_000, 50);
    const found = await processFindings(conf);
    expect(found.drift).toEqual([
      {
        check: 'process',
        problem: expect.stringMatching(/^postgres is BACKOFF under supervisord.*keeps exiting as it starts$/),
        fix: `read the end of its log in the log directory (postgres.log), fix the cause, then: supervisorctl -c ${conf} start postgres`,
      },
    ]);
    expect(found.notes).toEqual([{ check: 'process', problem: 'prometheus is stopped (by an operator)', fix: `supervisorctl -c ${conf} start prometheus` }]);
  });

  it('reports nothing where no supervisord configuration is named (a Swarm node, or a test stack)', async () => {
    expect(await processFindings(undefined)).toEqual({ drift: [], notes: [] });
    expect(await processFindings(path.join(dir, 'none.conf'))).toEqual({ drift: [], notes: [] });
  });
});
