import type { InstanceState } from '@agenthost/sdk';
import { unwrap } from '@agenthost/sdk';
import { client, type Env } from './client.ts';

/** What a verb's --wait waits for. */
const TARGET: Record<string, InstanceState> = { create: 'running', start: 'running', restart: 'running', stop: 'stopped' };

/**
 * Waits for the state with a progress display on stderr: each status the instance passes through (from its event
 * stream) and, on a terminal, the seconds spent. stdout gets the id and the state reached, for scripts.
 */
async function waitWithProgress(env: Env, id: string, state: InstanceState): Promise<void> {
  const sdk = client(env, true);
  const stop = new AbortController();
  const started = Date.now();
  let status = '…';
  const tty = process.stderr.isTTY;
  const draw = () => process.stderr.write(`\r  ${id}: ${status} (${Math.round((Date.now() - started) / 1000)} s)  `);
  const ticker = tty ? setInterval(draw, 500) : undefined;
  const watch = (async () => {
    for await (const ev of sdk.events(id, { signal: stop.signal })) {
      const next = ev.event === 'deleted' ? 'deleted' : (ev.data as { status: string }).status;
      if (next === status) continue;
      status = next;
      if (tty) draw();
      else process.stderr.write(`  ${id}: ${status}\n`);
    }
  })().catch(() => undefined); // the progress is a display: a stream that fails leaves the wait to decide
  try {
    const done = await sdk.waitFor(id, state, { timeoutSeconds: 600 });
    // Already there before its event stream said anything (a create served by the warm pool runs at once): say so.
    if (status !== done.status) {
      status = done.status;
      if (tty) draw();
      else process.stderr.write(`  ${id}: ${status}\n`);
    }
    if (tty) process.stderr.write('\n');
    env.out(`${id} ${done.status}`);
  } finally {
    if (ticker) clearInterval(ticker);
    stop.abort();
    await watch;
  }
}

const print = (env: Env, body: unknown) => env.out(JSON.stringify(body, null, 2));

export async function create(env: Env, opts: { name?: string; version?: string; wait: boolean }): Promise<void> {
  const { api } = client(env, true);
  const body = unwrap(
    await api.POST('/instance/create', {
      body: { framework: 'openclaw', ...(opts.name ? { name: opts.name } : {}), ...(opts.version ? { version: opts.version } : {}) },
    }),
  );
  print(env, body);
  if (opts.wait) await waitWithProgress(env, body.instance_id, 'running');
}

/** stop, start, restart and delete, each optionally waiting for the state it leads to. */
export async function verb(env: Env, name: 'stop' | 'start' | 'restart' | 'delete', id: string, wait: boolean): Promise<void> {
  const { api } = client(env, true);
  const params = { params: { path: { instanceId: id } } };
  const body =
    name === 'delete'
      ? unwrap(await api.DELETE('/instance/delete/{instanceId}', params))
      : name === 'stop'
        ? unwrap(await api.POST('/instance/stop/{instanceId}', params))
        : name === 'start'
          ? unwrap(await api.POST('/instance/start/{instanceId}', params))
          : unwrap(await api.POST('/instance/restart/{instanceId}', params));
  print(env, body);
  // DELETE answers once everything is gone (and a wait begun after it is 404, as for another user's instance).
  if (wait && name === 'delete') env.out(`${id} deleted`);
  else if (wait) await waitWithProgress(env, id, TARGET[name]!);
}

export async function list(env: Env): Promise<void> {
  const { instances } = unwrap(await client(env, true).api.GET('/instance/list'));
  for (const i of instances) env.out(`${i.instance_id}  ${i.status.padEnd(12)} ${i.name ?? ''}`);
}

export async function status(env: Env, id: string): Promise<void> {
  print(env, unwrap(await client(env, true).api.GET('/instance/status/{instanceId}', { params: { path: { instanceId: id } } })));
}

/** The last lines, or with follow each new line until the instance is deleted (or Ctrl-C). */
export async function logs(env: Env, id: string, opts: { follow: boolean; tail?: number }): Promise<void> {
  for await (const line of client(env, true).logs(id, { follow: opts.follow, ...(opts.tail === undefined ? {} : { tail: opts.tail }) })) env.out(line.text);
}

/** The lifecycle events as they happen, one line each, until the instance is deleted (or Ctrl-C). */
export async function events(env: Env, id: string): Promise<void> {
  for await (const ev of client(env, true).events(id)) {
    const d = ev.data as { status?: string; at?: string; deleted_at?: string; failure_reason?: string };
    env.out([d.at ?? d.deleted_at ?? '', ev.event, d.status ?? '', d.failure_reason ?? ''].join(' ').trim());
  }
}
