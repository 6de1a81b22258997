/**
 * The local HTTP server's limits and header text, on a real process over PostgreSQL: a body or headers that
 * trickle in are answered 408 at `http.requestTimeoutMs` (Node's own limit was 5 minutes, holding up to
 * `inbox.maxBodyBytes` per connection) and store nothing; past `http.maxConnections` a webhook is answered 503
 * `overloaded` and `/health` is served; header values sent as UTF-8 are read as UTF-8, as API Gateway hands them to the Lambda.
 */
import { connect, type Socket } from 'node:net';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  type QueueBoxProcess,
  type Receiver,
  signStandardWebhook,
  startQueueBox,
  startReceiver,
  testConfigYaml,
} from './support.ts';

const needs = await requireServices('local runtime http limits', ['postgres']);

const REQUEST_TIMEOUT_MS = 2000;
const MAX_CONNECTIONS = 6;

/** What came back on a raw connection: the bytes until the server closed it. */
function opened(port: number): Promise<{ socket: Socket; closed: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      let text = '';
      socket.setEncoding('latin1');
      socket.on('data', (part: string) => {
        text += part;
      });
      const closed = new Promise<string>((done) => socket.on('close', () => done(text)));
      resolve({ socket, closed });
    });
    socket.on('error', () => {});
    socket.once('error', reject);
  });
}

/** The start of a signed POST to /inbox/demo whose body is `body`, and the body itself. */
function signedRequest(id: string, body: string, extraHeaders = ''): { head: string; body: string } {
  const headers = Object.entries(signStandardWebhook(id, body))
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return {
    head: `POST /inbox/demo HTTP/1.1\r\nHost: x\r\n${headers}${extraHeaders}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    body,
  };
}

describe.skipIf(needs.skipReason)('local HTTP server limits (real process)', { timeout: 60_000 }, () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_http_limits', 2);
  let receiver: Receiver;
  let queuebox: QueueBoxProcess;
  let port: number;

  const rowsFor = async (key: string) =>
    (
      await pool.query<{ idempotency_key: string; headers: Record<string, string> }>(
        `SELECT idempotency_key, headers FROM "${schema.name}".inbox WHERE idempotency_key = $1`,
        [key],
      )
    ).rows;

  beforeAll(async () => {
    receiver = await startReceiver();
    queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: receiver.url,
        database: { url: needs.url.postgres, schema: schema.name },
        http: { requestTimeoutMs: REQUEST_TIMEOUT_MS, maxConnections: MAX_CONNECTIONS },
      }),
    });
    port = Number(new URL(await baseUrlOf(queuebox)).port);
  });

  afterAll(async () => {
    await cleanup();
    await receiver?.close();
  });

  it('answers 408 to a body that trickles in, closes the connection, stores nothing and logs a warning, not an error', async () => {
    const { head, body } = signedRequest(
      'slow-body-1',
      JSON.stringify({ type: 'order.created', data: { id: 'a' } }),
    );
    const { socket, closed } = await opened(port);
    socket.write(head + body.slice(0, 10));

    // Node's default would have held it for 300 s; the test's own timeout is 60 s.
    const answer = await closed;

    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toMatch(/\r\nContent-Type: application\/json\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: 'request_timeout',
    });
    expect(await rowsFor('slow-body-1')).toEqual([]);
    const aborted = await queuebox.waitForLog(
      (l) => l.message === 'request aborted by the client',
      'the aborted body logged',
    );
    expect(aborted, JSON.stringify(aborted)).toMatchObject({ level: 'WARN' });
    expect(queuebox.logs.filter((l) => l.level === 'ERROR')).toEqual([]);
  });

  it('answers 408 to headers that never end', async () => {
    const { socket, closed } = await opened(port);
    socket.write('POST /inbox/demo HTTP/1.1\r\nHost: x\r\nX-Slow: ');

    expect(await closed).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('answers headers over 16 KiB with 431 and a JSON error, and a request that is not HTTP with 400', async () => {
    const big = await opened(port);
    big.socket.write(`POST /inbox/demo HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    const garbled = await opened(port);
    garbled.socket.write('NOT HTTP AT ALL\r\n\r\n');

    const answers = [await big.closed, await garbled.closed];

    expect(answers[0]).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(answers[1]).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    const bodies = answers.map((a) => JSON.parse(a.slice(a.indexOf('\r\n\r\n') + 4)));
    expect(bodies[0]).toEqual({
      error: 'headers_too_large',
      message: 'The request headers are larger than 16 KiB',
    });
    expect(bodies[1]).toEqual({ error: 'bad_request', message: 'The request is not valid HTTP/1.1' });
  });

  it(`answers a webhook past http.maxConnections (${MAX_CONNECTIONS}) 503 overloaded with Retry-After, stores nothing, serves /health there, and serves again once they are gone`, async () => {
    const held = await Promise.all(
      Array.from({ length: MAX_CONNECTIONS }, async (_, i) => {
        const connection = await opened(port);
        const { head, body } = signedRequest(`held-${i}`, '{"type":"order.created","data":{"id":"h"}}');
        connection.socket.write(head + body.slice(0, 5));
        return connection;
      }),
    );
    const { head, body } = signedRequest('one-too-many', '{"type":"order.created","data":{"id":"x"}}');

    const extra = await opened(port);
    extra.socket.write(head + body);

    // Closed with nothing said before (server.maxConnections), which a sender and a load balancer see as a reset.
    const refused = await extra.closed;
    expect(refused).toMatch(/^HTTP\/1\.1 503 /);
    expect(refused).toMatch(/\r\nRetry-After: 1\r\n/i);
    expect(JSON.parse(refused.slice(refused.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: 'overloaded' });
    expect(await rowsFor('one-too-many')).toEqual([]);
    const health = await opened(port);
    health.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await health.closed).toMatch(/^HTTP\/1\.1 200 /);
    for (const connection of held) expect(await connection.closed).toMatch(/^HTTP\/1\.1 408 /);
    // The server counts a connection gone once it hears the client's FIN, a moment after the client saw its own.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const again = await opened(port);
    again.socket.write(`${head.replace('Host: x', 'Host: x\r\nConnection: close')}${body}`);
    expect(await again.closed).toMatch(/^HTTP\/1\.1 202 /);
    expect(await rowsFor('one-too-many')).toHaveLength(1);
  });

  it('reads header values sent as UTF-8 as UTF-8: a signed webhook-id with an accent verifies and is the key', async () => {
    const id = 'commande-é-✓';
    const body = JSON.stringify({ type: 'order.created', data: { id: 'u' } });
    const signed = signedRequest(id, body, 'X-Note: café\r\n');
    const { socket, closed } = await opened(port);

    // The header bytes are the UTF-8 of the text, as any HTTP client sends them.
    socket.write(
      Buffer.concat([
        Buffer.from(signed.head.replace('Host: x', 'Host: x\r\nConnection: close')),
        Buffer.from(body),
      ]),
    );

    expect(await closed).toMatch(/^HTTP\/1\.1 202 /);
    const [row] = await rowsFor(id);
    expect(row?.headers['x-note']).toBe('café');
  });
});
