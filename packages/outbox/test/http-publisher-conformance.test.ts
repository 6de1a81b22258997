import { type AddressInfo, createServer, type Socket } from 'node:net';
import { ConfigError, type OutgoingMessage } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import outboxPackage from '../package.json' with { type: 'json' };
import { checkHttpDestination, createHttpPublisher, USER_AGENT } from '../src/http-publisher.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

// What an outside HTTP conformance audit found the publisher doing wrong with destinations that answer unusually
// (an unsolicited 100 Continue, a reset kept-alive connection, a 2xx body that never ends, a redirect) and with
// request-bound headers a row carries from the webhook it came in as.

const aMessage = (over: Partial<OutgoingMessage> = {}): OutgoingMessage => ({
  id: '1',
  topic: 'orders.created',
  key: null,
  payload: { orderId: 1 },
  headers: {},
  attempt: 0,
  ...over,
});

/** What a raw destination was sent, and on how many connections. */
interface RawDestination {
  readonly url: string;
  /** The Idempotency-Key of each request read, in order. */
  readonly keys: string[];
  readonly connections: number;
  close(): Promise<void>;
}

/**
 * A raw HTTP/1.1 destination on 127.0.0.1 that writes its answers byte by byte as `answer` says: node:http cannot
 * split a 1xx head across writes, reset a connection after reading a request, or leave a chunked body unended.
 * `nth` counts the requests read on the connection, from 1.
 */
async function startRawDestination(
  answer: (socket: Socket, nth: number, key: string) => void,
): Promise<RawDestination> {
  const keys: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buffer = Buffer.alloc(0);
    let nth = 0;
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffer.toString('latin1', 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.byteLength < end + 4 + length) return;
        buffer = buffer.subarray(end + 4 + length);
        const key = /\r\nidempotency-key: *([^\r]*)/i.exec(head)?.[1] ?? '';
        keys.push(key);
        answer(socket, ++nth, key);
      }
    });
  });
  let connections = 0;
  server.on('connection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    keys,
    get connections() {
      return connections;
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const later = (ms: number, write: () => void) => setTimeout(write, ms);

describe('createHttpPublisher against destinations that answer unusually', () => {
  let destination: RawDestination | undefined;
  afterEach(async () => {
    await destination?.close();
    destination = undefined;
  });

  it('delivers once to a destination that sends an unsolicited 100 Continue, and takes the final status after it', async () => {
    // Prepare: each answer starts with a 100 Continue split across writes (with a header), then a 103 Early Hints
    // and a second 100, then the final status: 200 for the first request, 404 for the second. RFC 9110 §15.2: a
    // client reads past an unexpected 1xx. undici alone closes the connection on the 100 ("bad response").
    destination = await startRawDestination((socket, _nth, key) => {
      socket.write('HTTP/1.1 10');
      later(10, () => socket.write('0 Continue\r\nX-Note: un'));
      later(20, () =>
        socket.write(
          'asked\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n',
        ),
      );
      const final =
        key === '1'
          ? 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'
          : 'HTTP/1.1 404 Not Found\r\nContent-Length: 12\r\n\r\nno such hook';
      later(30, () => socket.write(final));
    });
    const publisher = createHttpPublisher({ type: 'http', url: destination.url });
    // Act
    const first = await publisher.publish(aMessage({ id: '1' }));
    const second = await publisher.publish(aMessage({ id: '2' }));
    await publisher.close();
    // Assess: each request went out once, both on one connection, and each final status decided.
    expect(first).toEqual({ kind: 'sent' });
    expect(second).toEqual({ kind: 'retry', error: 'HTTP 404 Not Found: no such hook' });
    expect(destination.keys).toEqual(['1', '2']);
    expect(destination.connections).toBe(1);
  });

  it('passes a 1xx head with a bare LF on to undici, which refuses it, rather than reading past it into a later answer', async () => {
    // Prepare: a 100 whose lines end in a bare LF, then a 500 whose body is a 200 head. Read up to the first CRLF
    // blank line, the 100 took the 500's head with it and the row was sent (an outside security review).
    destination = await startRawDestination((socket) => {
      socket.write('HTTP/1.1 100 Continue\nX: y\n\nHTTP/1.1 500 Refused\r\nContent-Length: 38\r\n\r\n');
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
    });
    const publisher = createHttpPublisher({ type: 'http', url: destination.url });
    // Act
    const outcome = await publisher.publish(aMessage({ id: '1' }));
    await publisher.close();
    // Assess
    expect(outcome).toMatchObject({
      kind: 'retry',
      error: expect.stringContaining('does not match the HTTP/1.1 protocol'),
    });
  });

  it('never reads past a 101 Switching Protocols into a later answer: a POST that was upgraded is not sent', async () => {
    // Prepare: a 101 (which switches the connection away from HTTP, so nothing after it is an answer to the POST),
    // then bytes that look like a 200. Dropped as a 100 is, the 200 would mark the row sent. The 1xx reader passes a
    // 101 on to undici, which refuses it for a request that asked no upgrade (this guards the outcome; the reader's
    // own 101 check changes no byte undici sees here).
    destination = await startRawDestination((socket) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
    });
    const publisher = createHttpPublisher({ type: 'http', url: destination.url, timeoutMs: 2000 });
    // Act
    const outcome = await publisher.publish(aMessage({ id: '1' }));
    await publisher.close();
    // Assess
    expect(outcome.kind).not.toBe('sent');
  });

  it('sends once more on a fresh connection when the server resets (RST) a kept-alive one as the request arrives', async () => {
    // Prepare: the second request on a connection is met with a reset, as a server (nginx, a load balancer) closing
    // an idle connection at the moment it is reused answers it. undici hands the reset over as a raw ECONNRESET.
    destination = await startRawDestination((socket, nth) => {
      if (nth > 1) socket.resetAndDestroy();
      else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
    const publisher = createHttpPublisher({ type: 'http', url: destination.url });
    // Act
    const first = await publisher.publish(aMessage({ id: '1' }));
    const second = await publisher.publish(aMessage({ id: '2' }));
    await publisher.close();
    // Assess: no attempt spent on the reset; sent again once, on a fresh connection.
    expect([first, second]).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    expect(destination.keys).toEqual(['1', '2', '2']);
    expect(destination.connections).toBe(2);
  });

  it('retries, without a second try, when a fresh connection is reset before an answer', async () => {
    // Prepare: nothing was answered on the connection, so nothing shows the request was not read.
    destination = await startRawDestination((socket) => socket.resetAndDestroy());
    const publisher = createHttpPublisher({ type: 'http', url: destination.url });
    // Act
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    // Assess
    expect(outcome.kind).toBe('retry');
    expect(outcome.kind === 'retry' && outcome.error).toMatch(/^network error: .*ECONNRESET/);
    expect(destination.keys).toEqual(['1']);
  });

  it('settles a 2xx whose body never ends as sent without waiting for it, and closes that connection', async () => {
    // Prepare: the first answer is a 200 with 64 KiB of a chunked body, then nothing more; the next a short 200.
    let served = 0;
    destination = await startRawDestination((socket) => {
      if (++served > 1) {
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
        return;
      }
      const chunk = Buffer.alloc(64 * 1024, 'a');
      socket.write(
        `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.byteLength.toString(16)}\r\n`,
      );
      socket.write(chunk);
      socket.write('\r\n');
    });
    // A timeout beyond the test's own: before, the row settled only when it ran out.
    const publisher = createHttpPublisher({ type: 'http', url: destination.url, timeoutMs: 120_000 });
    // Act
    const endless = await publisher.publish(aMessage({ id: '1' }));
    const next = await publisher.publish(aMessage({ id: '2' }));
    await publisher.close();
    // Assess: the next request went out on a new connection, the unread body's one being closed.
    expect([endless, next]).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    expect(destination.keys).toEqual(['1', '2']);
    expect(destination.connections).toBe(2);
  });

  it('reads a short 2xx body (4 KiB) to its end and keeps the connection', async () => {
    // Prepare
    const body = 'a'.repeat(4096);
    destination = await startRawDestination((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    });
    const publisher = createHttpPublisher({ type: 'http', url: destination.url });
    // Act
    const outcomes = [
      await publisher.publish(aMessage({ id: '1' })),
      await publisher.publish(aMessage({ id: '2' })),
    ];
    await publisher.close();
    // Assess
    expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    expect(destination.connections).toBe(1);
  });
});

describe('createHttpPublisher request headers and errors', () => {
  let receiver: HttpReceiver;
  beforeEach(async () => {
    receiver = await startHttpReceiver();
  });
  afterEach(async () => {
    await receiver.close();
  });

  it("leaves a row's request-bound headers (digests, ranges, conditions, Date, User-Agent) out and sends its own User-Agent", async () => {
    // Prepare: a row relayed from a webhook whose sender signed its bytes with a digest and named its client.
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const message = aMessage({
      headers: {
        'Content-Digest': 'sha-256=:AAAA:',
        'Repr-Digest': 'sha-256=:BBBB:',
        Digest: 'SHA-256=CCCC',
        'Content-MD5': 'DDDD',
        'Want-Digest': 'sha-256',
        'Want-Content-Digest': 'sha-256=1',
        'Want-Repr-Digest': 'sha-256=1',
        'Content-Range': 'bytes 0-1/2',
        Range: 'bytes=0-1',
        'If-Match': '"v1"',
        'If-None-Match': '*',
        'If-Modified-Since': 'Tue, 01 Dec 2026 00:00:00 GMT',
        'If-Unmodified-Since': 'Tue, 01 Dec 2026 00:00:00 GMT',
        'If-Range': '"v1"',
        Date: 'Tue, 01 Dec 2026 00:00:00 GMT',
        'Max-Forwards': '0',
        'User-Agent': 'Stripe/1.0',
        'X-Kept': 'yes',
        'Iffy-Header': 'kept too',
      },
    });
    // Act
    const outcome = await publisher.publish(message);
    await publisher.close();
    // Assess
    expect(outcome).toEqual({ kind: 'sent' });
    const headers = receiver.requests[0]?.headers ?? {};
    for (const name of Object.keys(message.headers).filter((h) => !['X-Kept', 'Iffy-Header'].includes(h))) {
      if (name !== 'User-Agent') expect(headers[name.toLowerCase()], name).toBeUndefined();
    }
    expect(headers['user-agent']).toBe(`QueueBox/${outboxPackage.version}`);
    expect(USER_AGENT).toBe(`QueueBox/${outboxPackage.version}`);
    expect(headers['x-kept']).toBe('yes');
    expect(headers['iffy-header']).toBe('kept too');
  });

  it("sends one Authorization, the configured header's, when the URL also has credentials (in any letter case)", async () => {
    // Prepare (a review: both went out, `Authorization: Basic …` first, and the configured Bearer never counted)
    const url = new URL(receiver.url);
    url.username = 'user';
    url.password = 'pass';
    const publisher = createHttpPublisher({
      type: 'http',
      url: url.toString(),
      headers: { authorization: 'Bearer abc' },
    });
    // Act
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    // Assess
    expect(outcome).toEqual({ kind: 'sent' });
    const raw = receiver.requests[0]?.rawHeaders ?? [];
    const authorizations = raw.filter((_, i) => i % 2 === 1 && raw[i - 1]?.toLowerCase() === 'authorization');
    expect(authorizations).toEqual(['Bearer abc']);
  });

  it('sends the User-Agent a destination configures instead of its own, in whatever letter case', async () => {
    // Prepare
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      headers: { 'user-agent': 'Billing-Relay/2' },
    });
    // Act
    await publisher.publish(aMessage());
    await publisher.publish(aMessage({ id: '2', headers: { 'X-Row': 'r' } }));
    await publisher.close();
    // Assess: one User-Agent each, the configured one.
    expect(receiver.requests.map((r) => r.headers['user-agent'])).toEqual([
      'Billing-Relay/2',
      'Billing-Relay/2',
    ]);
  });

  it("keeps a redirect's Location in the error, with our credentials taken out of it; the redirect is not followed", async () => {
    // Prepare: the destination moved and points to its new address, carrying the URL's function key along.
    receiver.handle((request, response) => {
      const status = request.headers['idempotency-key'] === '1' ? 301 : 307;
      response
        .writeHead(status, { location: `http://127.0.0.1:1/v2/hooks?code=AZURE-FUNCTION-KEY-123` })
        .end();
    });
    const publisher = createHttpPublisher({
      type: 'http',
      url: `${receiver.url}?code=AZURE-FUNCTION-KEY-123`,
    });
    // Act
    const moved = await publisher.publish(aMessage({ id: '1' }));
    const temporary = await publisher.publish(aMessage({ id: '2' }));
    await publisher.close();
    // Assess
    expect(moved).toEqual({
      kind: 'retry',
      error: 'HTTP 301 Moved Permanently (Location: http://127.0.0.1:1/v2/hooks?code=***)',
    });
    expect(temporary).toEqual({
      kind: 'retry',
      error: 'HTTP 307 Temporary Redirect (Location: http://127.0.0.1:1/v2/hooks?code=***)',
    });
    expect(receiver.requests).toHaveLength(2);
  });
});

describe('createHttpPublisher static header names', () => {
  it('refuses static headers whose names differ only in letter case (Host and host) before anything is sent', () => {
    // Prepare
    const options = {
      type: 'http',
      url: 'http://127.0.0.1:1/hooks',
      headers: { Host: 'other.example', 'X-Tenant': 'a', host: 'x.example' },
    } as const;
    // Act
    const issues = checkHttpDestination('billing', options);
    let error: unknown;
    try {
      createHttpPublisher({ ...options, name: 'billing' });
    } catch (e) {
      error = e;
    }
    // Assess
    expect(issues).toEqual([
      {
        path: 'destinations.billing.headers.host',
        message: 'is the same header as Host (names differ only in letter case); keep one of them',
      },
    ]);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues).toEqual(issues);
  });
});
