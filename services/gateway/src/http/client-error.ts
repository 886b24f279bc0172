import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { AppError, type ErrorCode } from '@agenthost/shared';

/**
 * Requests that Node's HTTP parser refuses never reach the router; without this, the client gets a bare
 * status line and an empty body. Here they get the error shape and the headers of every other answer.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || (socket as { _httpMessage?: unknown })._httpMessage) {
    socket.destroy();
    return;
  }
  const code: ErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW' ? 'REQUEST_HEADER_TOO_LARGE' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'REQUEST_TIMEOUT' : 'MALFORMED_REQUEST';
  const appErr = new AppError(code);
  const body = JSON.stringify(appErr.toBody());
  const head = [
    `HTTP/1.1 ${appErr.status} ${reason[appErr.status] ?? 'Bad Request'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-ID: ${randomUUID()}`,
    'X-Subscription-Tier: none',
    'X-Subscription-Expires: none',
    'X-Usage-Remaining: 0',
    'Connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}

const reason: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
