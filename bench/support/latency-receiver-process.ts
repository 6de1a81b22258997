/**
 * The latency benchmark's receiver (bench/latency.ts forks it): an HTTP server on its own event loop that answers
 * every request `200 ok` and records when each body arrived, by the run and seq the producer put in it.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { childInput, toParent } from './child.ts';

/** Parent → receiver. */
export type ReceiverCommand = { readonly type: 'count' } | { readonly type: 'dump' };
/** Receiver → parent. `received` holds [run, seq, receivedAt] per request, in arrival order. */
export type ReceiverMessage =
  | { readonly type: 'listening'; readonly url: string }
  | { readonly type: 'count'; readonly count: number }
  | { readonly type: 'dump'; readonly received: readonly [number, number, number][] };

/** The producer's clock and this one are the same system clock, read the same way. */
const now = () => performance.timeOrigin + performance.now();

/** Answers every request `200 ok` and records when its body arrived, by the run and seq in the JSON body. */
function runReceiver(): void {
  process.on('disconnect', () => process.exit(0));
  let received: [number, number, number][] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = now();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { run: number; seq: number };
        received.push([body.run, body.seq, at]);
      } catch {
        // Not one of ours: still answered, never counted.
      }
      response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
      response.end('ok');
    });
  });
  server.keepAliveTimeout = 30_000;
  process.on('message', (raw) => {
    const command = raw as ReceiverCommand;
    if (command.type === 'count') toParent({ type: 'count', count: received.length });
    if (command.type === 'dump') {
      toParent({ type: 'dump', received });
      received = [];
    }
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    toParent({ type: 'listening', url: `http://127.0.0.1:${port}/hooks` });
  });
}

childInput<Record<string, never>>();
runReceiver();
