import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, waitForPort } from './ports.ts';

/** One span as the services exported it over OTLP/HTTP (JSON). */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

/**
 * An OTLP/HTTP trace receiver (what a collector does with POST /v1/traces), keeping every span in memory:
 * the services are separate processes, so their spans reach the test the way they reach a collector.
 */
export async function startOtlpReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): void }> {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      try {
        for (const rs of JSON.parse(body).resourceSpans ?? []) {
          const service = rs.resource?.attributes?.find((a: { key: string }) => a.key === 'service.name')?.value?.stringValue ?? '';
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                service,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                kind: s.kind,
                attributes: Object.fromEntries(
                  (s.attributes ?? []).map((a: { key: string; value: Record<string, unknown> }) => [a.key, Object.values(a.value)[0]]),
                ),
              });
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, spans, close: () => server.close() };
}

/** Debian's prometheus, scraping the given targets every second, with its HTTP API on a free port. */
export async function startPrometheus(
  targets: { job: string; target: string }[],
): Promise<{ query(q: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>; stop(): Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-prom-'));
  const port = await freePort();
  const jobs = [...new Set(targets.map((t) => t.job))];
  const config = {
    global: { scrape_interval: '1s', evaluation_interval: '1s' },
    scrape_configs: jobs.map((job) => ({ job_name: job, static_configs: [{ targets: targets.filter((t) => t.job === job).map((t) => t.target) }] })),
  };
  // JSON is YAML: no YAML writer needed.
  writeFileSync(path.join(dir, 'prometheus.yml'), JSON.stringify(config));
  const proc = spawn(
    'prometheus',
    [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: 'ignore' },
  );
  await waitForPort(port, 30_000);
  return {
    async query(q) {
      const r = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
      const body = (await r.json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
      if (body.status !== 'success') throw new Error(`prometheus query failed: ${JSON.stringify(body)}`);
      return body.data.result;
    },
    async stop() {
      if (proc.exitCode === null) await new Promise<void>((r) => (proc.once('exit', () => r()), proc.kill('SIGTERM')));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
