/** HTTP transport: JSON-RPC over POST, GET /health, and WebSocket upgrades handed to PubSub. */
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { PubSub } from './pubsub.ts';
import { handleBody } from './rpc.ts';
import type { Methods } from './rpc.ts';

const MAX_BODY_BYTES = 1024 * 1024;

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'POST, GET, OPTIONS',
  'access-control-allow-headers': 'content-type, solana-client',
};

function handleHttp(methods: Methods, req: IncomingMessage, res: ServerResponse): void {
  if (req.method === 'OPTIONS') {
    res.writeHead(204, CORS).end();
    return;
  }
  if (req.method === 'GET' && req.url === '/health') {
    res.writeHead(200, { 'content-type': 'text/plain', ...CORS }).end('ok');
    return;
  }
  if (req.method !== 'POST') {
    res
      .writeHead(405, { allow: 'POST, GET, OPTIONS', 'content-type': 'text/plain', ...CORS })
      .end('Used HTTP Method is not allowed. POST or OPTIONS is required');
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size > MAX_BODY_BYTES) tooLarge = true;
    else chunks.push(c);
  });
  req.on('error', () => res.destroy());
  req.on('end', () => {
    if (tooLarge) {
      res.writeHead(413, { 'content-type': 'text/plain', ...CORS }).end('Payload Too Large');
      return;
    }
    let reply: string | null;
    try {
      reply = handleBody(Buffer.concat(chunks).toString('utf8'), methods);
    } catch (e) {
      reply = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: `Internal error: ${(e as Error).message}` } });
    }
    if (reply === null) res.writeHead(200, CORS).end();
    else res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...CORS }).end(reply);
  });
}

export interface Transport {
  wss: WebSocketServer;
  createHttpServer(): Server;
}

export function createTransport(methods: Methods, pubsub: PubSub): Transport {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY_BYTES });
  wss.on('connection', (ws) => pubsub.handleConnection(ws));
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  };
  return {
    wss,
    createHttpServer() {
      const server = createServer((req, res) => handleHttp(methods, req, res));
      server.on('upgrade', onUpgrade);
      server.on('clientError', (_err, socket) => socket.destroy());
      return server;
    },
  };
}
