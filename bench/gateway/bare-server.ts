import http from 'node:http';

// The baseline: a bare node:http server answering a JSON body of the same size and shape as
// GET /api/subscription/status. Prints its port on stdout.

const body = JSON.stringify({
  wallet_address: '9ByboyXFDxrujfT1dkQLjEZ611YAz8ipAUESCDvQvuUC',
  tier: 'pro',
  is_active: true,
  expires_at: new Date(Date.now() + 30 * 86_400_000).toISOString(),
  cancelled: false,
  instances_used: 0,
  instances_limit: 5,
  requests_today: 1,
  requests_limit: 10000,
  storage_used_mb: 0,
  storage_limit_mb: 1024,
});

const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ port: addr.port })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
