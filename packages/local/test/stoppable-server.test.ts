import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createStoppableServer } from '../src/runtime.ts';

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
