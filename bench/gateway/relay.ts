import { requestReply } from '../../packages/shared/src/nats/replies.ts';

const ask = new TextEncoder().encode('{}');

/** What a floor relay does with each request: one NATS request to its echo, whose reply is the answer (503 when none). */
export function relayOnce(
  nc: unknown,
  subject: string,
  res: { statusCode: number; setHeader(name: string, value: string): void; end(body?: Uint8Array): void },
): void {
  requestReply(nc as never, subject, ask, 5000).then(
    (data) => {
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.end(data);
    },
    () => {
      res.statusCode = 503;
      res.end();
    },
  );
}
