// The edge's cost on the API path: the same authenticated GET /api/subscription/status straight to the gateway
// (HTTP on loopback) and through Caddy (HTTPS, TLS kept alive, Caddy → gateway on loopback), in alternating slices
// of the same run. Reported: throughput ratio, added latency at a fixed load both can carry, and Caddy's CPU time
// per request.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../packages/shared/src/config.ts';
import { baseConfig } from '../../services/edge/src/caddy-config.ts';
import { edgeSettings } from '../../services/edge/src/settings.ts';
import { closedLoop, merge, openLoop, pairedAdded, r3, report, type RunResult, type Target } from './load.ts';
import { cpuSeconds } from './processes.ts';

// Caddy's ports for the benchmark (the edge suites use 18740-18743).
const HTTPS = 18744;

export async function edgeCost(o: { direct: Target; gatewayHost: string; connections: number; rounds: number; sliceMs: number; log: (m: string) => void }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-bench-edge-'));
  const settings = parseConfig(edgeSettings, {
    EDGE_HTTPS_PORT: String(HTTPS),
    EDGE_HTTP_PORT: '18745',
    EDGE_BIND: '127.0.0.1',
    EDGE_ADMIN_SOCKET: path.join(dir, 'admin.sock'),
    EDGE_KEEPER_SOCKET: path.join(dir, 'keeper.sock'),
    EDGE_DATA_DIR: path.join(dir, 'data'),
    EDGE_GATEWAYS: o.gatewayHost,
  });
  writeFileSync(path.join(dir, 'caddy.json'), JSON.stringify(baseConfig(settings)));
  const caddy = spawn('caddy', ['run', '--config', path.join(dir, 'caddy.json')], {
    env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
    stdio: 'ignore',
  });
  try {
    const caFile = path.join(dir, 'data', 'pki', 'authorities', 'local', 'root.crt');
    for (let i = 0; i < 200 && !existsSync(caFile); i++) await new Promise((r) => setTimeout(r, 100));
    const edge: Target = { ...o.direct, url: `https://${settings.EDGE_DOMAIN}:${HTTPS}${new URL(o.direct.url).pathname}`, ca: readFileSync(caFile, 'utf8') };
    await closedLoop(edge, o.connections, 2000); // warm-up (TLS handshakes, Caddy's connection pool)
    const directParts: RunResult[] = [];
    const edgeParts: RunResult[] = [];
    let caddyCpu = 0;
    for (let i = 0; i < o.rounds; i++) {
      directParts.push(await closedLoop(o.direct, o.connections, o.sliceMs));
      const c0 = cpuSeconds(caddy.pid!);
      // Caddy's CPU time covers TLS (the keep-alive connections' handshakes happened in the warm-up) and the proxying.
      edgeParts.push(await closedLoop(edge, o.connections, o.sliceMs));
      caddyCpu += cpuSeconds(caddy.pid!) - c0;
    }
    const direct = merge(directParts);
    const viaEdge = merge(edgeParts);
    // Latency at a load both carry (half the edge's maximum), alternating.
    const rate = Math.max(1, Math.round(viaEdge.rps / 2));
    const dHalf: RunResult[] = [];
    const eHalf: RunResult[] = [];
    for (let i = 0; i < o.rounds; i++) {
      dHalf.push(await openLoop(o.direct, rate, 1000));
      eHalf.push(await openLoop(edge, rate, 1000));
    }
    const d = merge(dHalf);
    const e = merge(eHalf);
    const result = {
      path: 'client → Caddy (HTTPS, keep-alive) → gateway, against client → gateway (HTTP), same run, alternating slices',
      max_throughput: { direct: report(direct), edge: report(viaEdge), ratio: r3(viaEdge.rps / direct.rps) },
      caddy_cpu_us_per_request: Math.round((caddyCpu / Math.max(1, viaEdge.requests)) * 1_000_000),
      half_load: {
        rate_rps: rate,
        direct: report(d),
        edge: report(e),
        added_ms: pairedAdded(eHalf, dHalf),
        added_ms_pooled: { p50: r3(e.latencyMs.p50 - d.latencyMs.p50), p99: r3(e.latencyMs.p99 - d.latencyMs.p99) },
      },
      load_average: os.loadavg()[0],
      errors: [direct, viaEdge, d, e].reduce((n, r) => n + r.errors + r.non2xx, 0),
    };
    o.log(
      `edge: ${viaEdge.rps} vs ${direct.rps} req/s direct (ratio ${result.max_throughput.ratio}), Caddy ${result.caddy_cpu_us_per_request} µs CPU/request, added at ${rate} req/s (median of paired slices) p50 ${result.half_load.added_ms.p50} ms p99 ${result.half_load.added_ms.p99} ms; load average ${os.loadavg()[0]!.toFixed(1)}`,
    );
    return result;
  } finally {
    caddy.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}
