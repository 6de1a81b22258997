/**
 * The HTTP sink of the outbox benchmark, run as its own process (forked by `startHttpSink`) so that answering
 * requests does not share an event loop with the poller it measures. A node:http server on 127.0.0.1 (a free
 * port) that reads each body and answers `200 ok` with keep-alive, counting requests and distinct
 * `Idempotency-Key`s (a second delivery of a row would show as more requests than keys).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { childInput, toParent } from './child.ts';
import type { SinkCommand, SinkMessage } from './http-sink.ts';

childInput<Record<string, never>>();
let requests = 0;
let keys = new Set<string>();
let cpuAtReset = process.cpuUsage();

const server = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    requests++;
    const key = request.headers['idempotency-key'];
    if (typeof key === 'string') keys.add(key);
    response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
    response.end('ok');
  });
});
server.keepAliveTimeout = 30_000;

process.on('message', (raw) => {
  const command = raw as SinkCommand;
  if (command.type === 'reset') {
    requests = 0;
    keys = new Set();
    cpuAtReset = process.cpuUsage();
    toParent({ type: 'reset' } satisfies SinkMessage);
  } else if (command.type === 'stats') {
    const cpu = process.cpuUsage(cpuAtReset);
    toParent({
      type: 'stats',
      requests,
      distinctKeys: keys.size,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
    } satisfies SinkMessage);
  }
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  toParent({ type: 'listening', url: `http://127.0.0.1:${port}/hooks` } satisfies SinkMessage);
});
