/**
 * A graceful stop under steady keep-alive traffic (`startRuntime` in this process, on a real PostgreSQL, real HTTP
 * over loopback). The server used to close only the connections idle at the stop: the busy ones went on serving new
 * requests (answered 202) until the shutdown timeout, so the stop ended unclean. Now every answer after the stop
 * carries `Connection: close`, a request that comes on an open connection after the stop is answered 503 with
 * `Retry-After` without being stored, and the stop finishes at once and clean, with every 202 stored.
 */

import { once } from 'node:events';
import http from 'node:http';
import { createConnection, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '@queuebox/config';
import { silentLogger } from '@queuebox/core';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local runtime keep-alive stop test', ['postgres']);

/** The head of a keep-alive POST to the `hooks` source carrying `body`. */
function requestHead(body: string): string {
  return [
    'POST /inbox/hooks HTTP/1.1',
    'host: 127.0.0.1',
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(body)}`,
    '',
    '',
  ].join('\r\n');
}

/** A raw connection; `closed` resolves with everything the server sent once it closed the connection. */
async function connect(port: number): Promise<{ socket: Socket; closed: Promise<string> }> {
  const socket = createConnection({ host: '127.0.0.1', port });
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const closed = new Promise<string>((resolve) => {
    socket.once('close', () => resolve(Buffer.concat(chunks).toString()));
  });
  return { socket, closed };
}

interface Answer {
  readonly status: number;
  readonly connection: string | undefined;
  readonly retryAfter: string | undefined;
  readonly body: string;
  /** The request was sent after the stop began. */
  readonly sentAfterStop: boolean;
  /** The answer came after the stop began. */
  readonly answeredAfterStop: boolean;
}

describe.skipIf(needs.skipReason)('local runtime stop under keep-alive traffic', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_keepalive', 1);
  let runtime: Runtime | undefined;

  afterAll(async () => {
    await runtime?.stop('test end');
  });

  /** A runtime with one open source `hooks` (key `$.id`) and nothing else running. */
  const start = () =>
    startRuntime(
      parseConfig({
        database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
        http: { port: 0, host: '127.0.0.1' },
        inbox: { relay: { enabled: false } },
        sources: {
          hooks: {
            type: 'http',
            path: 'hooks',
            auth: { scheme: 'none' },
            topic: 'hooks',
            idempotencyKey: { path: '$.id' },
          },
        },
        destinations: { sink: { type: 'http', url: 'http://127.0.0.1:9/sink' } },
        routes: [{ match: '#', destination: 'sink' }],
      }),
      {
        logger: silentLogger,
        brokerConsumers: false,
        statsIntervalMs: 0,
        retentionIntervalMs: 0,
        wakeUps: false,
        // Bounds the tests before the fix: busy connections kept the server open until this timeout.
        shutdownTimeoutMs: 8000,
      },
    );

  const storedIds = async () => {
    const { rows } = await pool.query<{ idempotency_key: string }>(
      `SELECT idempotency_key FROM "${schema.name}".inbox ORDER BY id`,
    );
    return rows.map((r) => r.idempotency_key);
  };

  it('closes every keep-alive connection after its current answer, stores no new request and stops clean at once', async () => {
    // Prepare: a runtime with one open source, and 4 keep-alive connections posting without a pause.
    runtime = await start();
    const { port } = runtime;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    let stopAt = 0;
    let done = false;
    let n = 0;
    const answers: Answer[] = [];
    const post = () =>
      new Promise<void>((resolve) => {
        const body = JSON.stringify({ id: `m-${++n}`, n });
        const sentAfterStop = stopAt !== 0;
        const request = http.request(
          {
            host: '127.0.0.1',
            port,
            path: '/inbox/hooks',
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json' },
          },
          (response) => {
            const chunks: Buffer[] = [];
            response.on('data', (chunk: Buffer) => chunks.push(chunk));
            response.on('end', () => {
              answers.push({
                status: response.statusCode ?? 0,
                connection: response.headers.connection,
                retryAfter: response.headers['retry-after'],
                body: Buffer.concat(chunks).toString(),
                sentAfterStop,
                answeredAfterStop: stopAt !== 0,
              });
              resolve();
            });
          },
        );
        // Refused or reset once the server is closed: the sender would retry later.
        request.on('error', () => sleep(20).then(resolve));
        request.end(body);
      });
    const senders = Array.from({ length: 4 }, async () => {
      while (!done) await post();
    });
    await sleep(600);
    expect(answers.filter((a) => a.status === 202).length).toBeGreaterThan(10);

    // Act
    stopAt = Date.now();
    const clean = await runtime.stop('test');
    const stopMs = Date.now() - stopAt;
    done = true;
    await Promise.all(senders);
    agent.destroy();

    // Assess: clean and prompt, not at the shutdown timeout.
    expect(clean).toBe(true);
    expect(stopMs).toBeLessThan(3000);
    const afterStop = answers.filter((a) => a.answeredAfterStop);
    // At most the request each connection had in progress at the stop is served; nothing sent after it is stored.
    expect(afterStop.filter((a) => a.status === 202).length).toBeLessThanOrEqual(4);
    expect(answers.filter((a) => a.sentAfterStop && a.status === 202)).toEqual([]);
    // Only an answer already on its way at the stop can lack `Connection: close`: at most one per connection.
    expect(afterStop.filter((a) => a.connection !== 'close').length).toBeLessThanOrEqual(4);
    for (const refused of afterStop.filter((a) => a.status !== 202)) {
      expect(refused.status).toBe(503);
      expect(refused.connection).toBe('close');
      expect(refused.retryAfter).toMatch(/^\d+$/);
      expect(JSON.parse(refused.body)).toMatchObject({ error: 'store_unavailable' });
    }
    // Nothing lost: every 202 is a stored row, and nothing else was stored.
    const stored = (await storedIds()).filter((id) => id.startsWith('m-'));
    expect(stored).toHaveLength(answers.filter((a) => a.status === 202).length);
  }, 30_000);

  it('answers the request in progress at the stop with Connection: close, and one that comes after it 503 unstored', async () => {
    // Prepare: A has sent its headers and half its body (a request in progress); B half its headers (no request yet).
    runtime = await start();
    const inProgress = JSON.stringify({ id: 'raw-in-progress' });
    const late = JSON.stringify({ id: 'raw-late' });
    const a = await connect(runtime.port);
    const b = await connect(runtime.port);
    a.socket.write(`${requestHead(inProgress)}${inProgress.slice(0, 5)}`);
    b.socket.write('POST /inbox/hooks HTTP/1.1\r\nhost: 127.0.0.1\r\n');
    await sleep(100);

    // Act
    const stopAt = Date.now();
    const stopped = runtime.stop('test');
    await sleep(100);
    a.socket.write(inProgress.slice(5));
    b.socket.write(
      requestHead(late).slice('POST /inbox/hooks HTTP/1.1\r\nhost: 127.0.0.1\r\n'.length) + late,
    );
    const [answerA, answerB] = await Promise.all([a.closed, b.closed]);

    // Assess: both connections closed after their answer, and the stop finished clean at once.
    expect(await stopped).toBe(true);
    expect(Date.now() - stopAt).toBeLessThan(3000);
    expect(answerA).toMatch(/^HTTP\/1\.1 202 /);
    expect(answerA).toMatch(/\r\nconnection: close\r\n/i);
    expect(answerB).toMatch(/^HTTP\/1\.1 503 /);
    expect(answerB).toMatch(/\r\nconnection: close\r\n/i);
    expect(answerB).toMatch(/\r\nretry-after: 5\r\n/i);
    expect(JSON.parse(answerB.slice(answerB.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: 'store_unavailable',
    });
    const stored = (await storedIds()).filter((id) => id.startsWith('raw-'));
    expect(stored).toEqual(['raw-in-progress']);
  }, 30_000);
});
