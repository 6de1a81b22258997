import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createStoppableServer, OVERFLOW_CONNECTIONS } from '../src/runtime.ts';

describe('createStoppableServer', () => {
  it('answers every pipelined request it handled before a stop, then closes the connection', async () => {
    // Prepare: each request is answered 100 ms after it was handled (as a store would answer).
    const handled: string[] = [];
    const stoppable = createStoppableServer({}, () => (request, response) => {
      handled.push(request.url ?? '');
      setTimeout(
        () => response.writeHead(202, { 'content-type': 'text/plain' }).end(`stored ${request.url}`),
        100,
      );
    });
    await new Promise<void>((resolve) => stoppable.server.listen(0, '127.0.0.1', resolve));
    const { port } = stoppable.server.address() as AddressInfo;
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk;
    });
    const socketClosed = new Promise((resolve) => socket.on('close', resolve));
    await new Promise((resolve) => socket.on('connect', resolve));
    // Act: two pipelined POSTs, and the stop while both are being handled.
    socket.write(
      'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n',
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    const stopped = stoppable.close();
    await socketClosed;
    await stopped;
    // Assess: both handled and both answered, the last with Connection: close.
    expect(handled).toEqual(['/a', '/b']);
    expect(received.match(/stored \/\w/g)).toEqual(['stored /a', 'stored /b']);
    expect(received.match(/^HTTP\/1\.1 202/gm)).toHaveLength(2);
    const [, first = '', second = ''] = received.toLowerCase().split('http/1.1 202');
    expect(first).toContain('connection: keep-alive');
    expect(second).toContain('connection: close');
  });
});

/** A server on a free port whose listener answers 200 `handled <url>` at once; and a raw client. */
async function serve(limits: Parameters<typeof createStoppableServer>[2] = {}) {
  const handled: string[] = [];
  const stoppable = createStoppableServer(
    {},
    () => (request, response) => {
      handled.push(request.url ?? '');
      request.resume();
      request.on('end', () => response.writeHead(200).end(`handled ${request.url}`));
    },
    limits,
  );
  await new Promise<void>((resolve) => stoppable.server.listen(0, '127.0.0.1', resolve));
  const { port } = stoppable.server.address() as AddressInfo;
  const open = async (send?: string) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk;
    });
    socket.on('error', () => {});
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await new Promise((resolve) => socket.on('connect', resolve));
    if (send !== undefined) socket.write(send);
    return { socket, closed, received: () => received };
  };
  return { stoppable, handled, open };
}

const within = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([
    promise.then(() => 'done'),
    new Promise((resolve) => setTimeout(() => resolve('still open'), ms)),
  ]);

describe('createStoppableServer at a stop', () => {
  it('closes at once a connection that sent nothing, and within 2 s one that sent part of its headers (Node no longer times them out)', async () => {
    // Prepare
    const { stoppable, open } = await serve();
    const silent = await open();
    const partial = await open('POST /inbox/x HTTP/1.1\r\nHost: x\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Act: before, the stop waited for the whole shutdown timeout
    const stopping = stoppable.close();

    // Assess
    expect(await within(silent.closed, 200)).toBe('done');
    expect(await within(stopping, 3_500)).toBe('done');
    expect(await within(partial.closed, 100)).toBe('done');
  });

  it('answers a request whose headers ended within the grace, however long its body then takes', async () => {
    // Prepare: part of the headers before the stop
    const { stoppable, open, handled } = await serve();
    const late = await open('POST /after HTTP/1.1\r\nHost: x\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Act: the headers end 100 ms into the stop, the body 2.5 s into it (past the 2 s grace)
    const stopping = stoppable.close();
    setTimeout(() => late.socket.write('Content-Length: 2\r\n\r\n'), 100);
    setTimeout(() => late.socket.write('{}'), 2_500);
    await within(late.closed, 5_000);

    // Assess: answered, not reset at the grace's end (review)
    expect(handled).toEqual(['/after']);
    expect(late.received()).toMatch(/^HTTP\/1\.1 200[\s\S]*handled \/after/);
    expect(await within(stopping, 1_000)).toBe('done');
  });

  it('cuts a request still arriving once it has had requestTimeoutMs, and finishes one that arrives in time', async () => {
    // Prepare: one body trickles and never ends; another ends 200 ms into the stop
    const { stoppable, open, handled } = await serve({ requestTimeoutMs: 600 });
    const trickle = await open('POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab');
    const late = await open('POST /late HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab');
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Act
    const stopping = stoppable.close();
    setTimeout(() => late.socket.write('cd'), 200);
    const stopped = await within(stopping, 3_000);

    // Assess
    expect(stopped).toBe('done');
    expect(handled).toEqual(['/slow', '/late']);
    expect(late.received()).toMatch(/^HTTP\/1\.1 200[\s\S]*handled \/late/);
    expect(trickle.received()).toBe('');
  });
});

describe('createStoppableServer beyond maxConnections', () => {
  it('serves /health and answers anything else 503 overloaded with Retry-After, instead of resetting', async () => {
    // Prepare: both slots held by connections that say nothing
    const { stoppable, open, handled } = await serve({ maxConnections: 2 });
    await open();
    await open();

    // Act: before, each further connection was reset (server.maxConnections)
    const health = await open('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    const webhook = await open('POST /inbox/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}');
    await Promise.all([health.closed, webhook.closed].map((p) => within(p, 2_000)));
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Assess
    expect(health.received()).toMatch(/^HTTP\/1\.1 200[\s\S]*handled \/health/);
    expect(webhook.received()).toMatch(/^HTTP\/1\.1 503/);
    expect(webhook.received().toLowerCase()).toContain('retry-after: 1');
    expect(webhook.received()).toContain('"error":"overloaded"');
    expect(handled).toEqual(['/health']);
    await stoppable.close();
  });

  it('answers 503 at once and closes a connection beyond the overflow too, and drops a silent overflow one after 2 s', async () => {
    // Prepare
    const { stoppable, open } = await serve({ maxConnections: 1 });
    await open();
    const overflow = [];
    for (let i = 0; i < OVERFLOW_CONNECTIONS; i++) overflow.push(await open());

    // Act
    const beyond = await open();
    const closedBeyond = await within(beyond.closed, 1_000);
    const closedSilent = await within(overflow[0]?.closed ?? Promise.resolve(), 4_000);

    // Assess
    expect(closedBeyond).toBe('done');
    expect(beyond.received()).toMatch(/^HTTP\/1\.1 503[\s\S]*"error":"overloaded"/);
    expect(closedSilent).toBe('done');
    await stoppable.close();
  });
});
