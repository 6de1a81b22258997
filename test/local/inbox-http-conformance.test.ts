/**
 * The local inbox server against HTTP's request rules (an outside HTTP conformance audit): an absolute-form target
 * reaches its source (RFC 9112 §3.2.2) and so does a percent-encoded unreserved character (RFC 3986 §6.2.2.2), while
 * `//` and `..` paths stay unknown; a path no source answers at is 404 whatever the method; and a request that
 * awaits `100 Continue` gets the answer its headers decide (404, 405, 413, 415) without being asked for its body
 * (RFC 9110 §10.1.1), or 100 and then the usual answer. The server is the runtime's (createStoppableServer over
 * createRequestHandler) with the real ingestion; every answer here is decided before a store could be reached.
 */
import { connect } from 'node:net';
import type { InboxStore } from '@queuebox/core';
import { createIngestion } from '@queuebox/inbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../packages/local/src/logger.ts';
import { createQueueBoxMetrics } from '../../packages/local/src/metrics.ts';
import { createStoppableServer, type StoppableServer } from '../../packages/local/src/runtime.ts';
import { bareRequestPath, createRequestHandler } from '../../packages/local/src/server.ts';

const TOKEN = 'orders-test-token';
const MAX_BODY_BYTES = 4096;

/** A store no answer here may reach: each is decided by the path, the method, the headers or the credential. */
const untouchable = new Proxy({} as InboxStore, {
  get: (_, name) => () => {
    throw new Error(`the store was asked for ${String(name)}`);
  },
});

let httpServer: StoppableServer;
let port: number;
/** Whether the runtime is ready (its store open): a request is answered 503 while it is not. */
let ready = true;

beforeAll(async () => {
  const ingestion = createIngestion({
    store: untouchable,
    sources: { orders: { type: 'http', auth: { scheme: 'bearer', secrets: [TOKEN] } } },
    inbox: { basePath: '/inbox', maxBodyBytes: MAX_BODY_BYTES },
  });
  httpServer = createStoppableServer({}, (isStopping) =>
    createRequestHandler({
      ingestion,
      ping: async () => {},
      metrics: createQueueBoxMetrics({ sources: ['orders'] }),
      logger: createLogger({ level: 'error', write: () => {} }),
      isStopping,
      isReady: () => ready,
    }),
  );
  await new Promise<void>((resolve) => httpServer.server.listen(0, '127.0.0.1', resolve));
  port = (httpServer.server.address() as { port: number }).port;
});

afterAll(async () => {
  await httpServer.close();
});

/** What a raw request received: every byte the server wrote, until it closed the connection or 1.5 s passed. */
interface Exchange {
  readonly text: string;
  /** The status of each answer in order, `100` included. */
  readonly statuses: number[];
  /** Whether the body was sent (with the head, or after a `100 Continue`). */
  readonly bodySent: boolean;
}

/**
 * Sends a request's head over a raw socket (`Connection: close`, so the server closes after its answer) and its
 * `body`: with the head when `withHead`, else once the server answered `100 Continue`.
 */
function exchange(
  method: string,
  target: string,
  headers: Readonly<Record<string, string>>,
  body?: string,
  withHead = false,
): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let bodySent = false;
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
      resolve({ text, statuses, bodySent });
    };
    const timer = setTimeout(done, 1500);
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (body !== undefined && !bodySent && text.includes('100 Continue\r\n\r\n')) {
        bodySent = true;
        socket.write(body);
      }
    });
    socket.on('error', () => {});
    socket.on('close', done);
    const lines = [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close'];
    for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
    socket.write(`${lines.join('\r\n')}\r\n\r\n${withHead && body !== undefined ? body : ''}`);
    if (withHead) bodySent = true;
  });
}

/** A JSON POST of `body` with its length, sent at once (no `Expect`). */
function post(target: string, body = '{"kind":"order"}', headers: Record<string, string> = {}) {
  return exchange(
    'POST',
    target,
    { 'Content-Type': 'application/json', 'Content-Length': String(body.length), ...headers },
    body,
    true,
  );
}

/** The JSON body of the last answer of an exchange. */
function lastBody(exchanged: Exchange): unknown {
  return JSON.parse(exchanged.text.slice(exchanged.text.lastIndexOf('\r\n\r\n') + 4));
}

describe('request targets', () => {
  it('reads the path of an absolute-form target and decodes percent-encoded unreserved characters only', () => {
    // Act / Assess
    expect(bareRequestPath('http://evil.example/inbox/orders')).toBe('/inbox/orders');
    expect(bareRequestPath('HTTPS://evil.example:8443/inbox/orders/?x=1')).toBe('/inbox/orders');
    expect(bareRequestPath('http://evil.example')).toBe('/');
    expect(bareRequestPath('/inbox/%6Frders')).toBe('/inbox/orders');
    expect(bareRequestPath('/inbox/%7e-%5F.%41')).toBe('/inbox/~-_.A');
    expect(bareRequestPath('/inbox/%2Forders')).toBe('/inbox/%2Forders');
    expect(bareRequestPath('/inbox/%25%36Frders')).toBe('/inbox/%256Frders');
    expect(bareRequestPath('/inbox/x/%2e%2e/orders')).toBe('/inbox/x/../orders');
    expect(bareRequestPath('//evil.example/inbox/orders')).toBe('//evil.example/inbox/orders');
    expect(bareRequestPath('http://evil.example//inbox/orders')).toBe('//inbox/orders');
  });

  it('routes an absolute-form target and a percent-encoded unreserved character to their source', async () => {
    // Act: no credential, so reaching the source is a 401 (a path no source answers at is a 404).
    const absolute = await post('http://evil.example/inbox/orders');
    const encoded = await post('/inbox/%6F%72ders');
    // Assess
    expect(absolute.statuses).toEqual([401]);
    expect(encoded.statuses).toEqual([401]);
  });

  it('keeps //, .. and encoded-slash paths unknown (404), however a URL parser would resolve them', async () => {
    // Prepare
    const targets = [
      '/inbox//orders',
      '/inbox/x/../orders',
      '/inbox/x/%2e%2e/orders',
      '/inbox/x/%2E%2E/orders',
      '//evil.example/inbox/orders',
      '/inbox\\orders',
      '/inbox%2Forders',
      'http://evil.example/inbox/x/../orders',
    ];
    // Act
    const answers = await Promise.all(targets.map((target) => post(target)));
    // Assess
    expect(answers.map((a, i) => [targets[i], a.statuses])).toEqual(targets.map((t) => [t, [404]]));
  });

  it('decodes nothing of a path outside the inbox: /%6detrics is no metrics path (a proxy deny rule holds)', async () => {
    // Act: the metrics path sent percent-encoded, and sent plainly
    const encoded = await exchange('GET', '/%6detrics', {});
    const plain = await exchange('GET', '/metrics', {});
    // Assess (an outside security review: both were served)
    expect(encoded.statuses).toEqual([404]);
    expect(plain.statuses).toEqual([200]);
  });

  it('answers a target of 16,000 slashes as an unknown path (trailing slashes trimmed by trimTrailingSlashes)', async () => {
    // Act: `/+$` took time quadratic in the run's length: 0.3-0.6 s of the event loop per such request
    const answer = await post(`/inbox${'/'.repeat(16_000)}x`);
    // Assess
    expect(answer.statuses).toEqual([404]);
    expect(bareRequestPath(`/inbox/orders${'/'.repeat(1_000)}`)).toBe('/inbox/orders');
  });

  it('answers 404 to any method at a path no source answers at, and 405 with Allow: POST at a source', async () => {
    // Act
    const unknown = await exchange('GET', '/inbox/nope', {});
    const known = await exchange('GET', '/inbox/orders', {});
    // Assess
    expect(unknown.statuses).toEqual([404]);
    expect(lastBody(unknown)).toMatchObject({ error: 'unknown_source' });
    expect(unknown.text.toLowerCase()).not.toContain('allow:');
    expect(known.statuses).toEqual([405]);
    expect(known.text.toLowerCase()).toContain('allow: post');
  });
});

describe('Expect: 100-continue', () => {
  const expecting = (headers: Record<string, string>) => ({ Expect: '100-continue', ...headers });

  it('answers 503 while the runtime is not ready, without asking for the body', async () => {
    // Prepare
    ready = false;
    try {
      // Act
      const answer = await exchange(
        'POST',
        '/inbox/orders',
        expecting({ 'Content-Type': 'application/json', 'Content-Length': '2000' }),
        `{"x":"${'y'.repeat(1992)}"}`,
      );
      // Assess
      expect(answer.statuses).toEqual([503]);
      expect(answer.bodySent).toBe(false);
    } finally {
      ready = true;
    }
  });

  it('answers 415 to a Content-Type that is not JSON without asking for the body', async () => {
    // Act
    const answer = await exchange(
      'POST',
      '/inbox/orders',
      expecting({ 'Content-Type': 'text/plain', 'Content-Length': '2000' }),
      'x'.repeat(2000),
    );
    // Assess
    expect(answer.statuses).toEqual([415]);
    expect(answer.bodySent).toBe(false);
    expect(lastBody(answer)).toMatchObject({ error: 'unsupported_media_type' });
  });

  it('answers 413 to a declared Content-Length over the limit without asking for the body, whatever its type', async () => {
    // Act
    const json = await exchange(
      'POST',
      '/inbox/orders',
      expecting({ 'Content-Type': 'application/json', 'Content-Length': '5000000' }),
      '{}',
    );
    const text = await exchange(
      'POST',
      '/inbox/orders',
      expecting({ 'Content-Type': 'text/plain', 'Content-Length': '5000000' }),
      '{}',
    );
    // Assess
    expect([json.statuses, text.statuses]).toEqual([[413], [413]]);
    expect([json.bodySent, text.bodySent]).toEqual([false, false]);
    expect(lastBody(json)).toMatchObject({ error: 'payload_too_large' });
  });

  it('answers 404 at an unknown path and 405 to another method without asking for the body', async () => {
    // Act
    const unknown = await exchange(
      'POST',
      '/inbox/nope',
      expecting({ 'Content-Type': 'application/json', 'Content-Length': '2' }),
      '{}',
    );
    const method = await exchange(
      'PUT',
      '/inbox/orders',
      expecting({ 'Content-Type': 'application/json', 'Content-Length': '2' }),
      '{}',
    );
    // Assess
    expect([unknown.statuses, method.statuses]).toEqual([[404], [405]]);
    expect([unknown.bodySent, method.bodySent]).toEqual([false, false]);
  });

  it('answers 100 to a request its headers do not decide, then reads the body and answers as usual', async () => {
    // Prepare
    const body = '{"kind":"order"}';
    // Act: the wrong token is only checked once the body is in (the ingestion's order).
    const answer = await exchange(
      'POST',
      '/inbox/orders',
      expecting({
        'Content-Type': 'application/json',
        'Content-Length': String(body.length),
        Authorization: `Bearer ${TOKEN}-typo`,
      }),
      body,
    );
    // Assess
    expect(answer.statuses).toEqual([100, 401]);
    expect(answer.bodySent).toBe(true);
    expect(lastBody(answer)).toMatchObject({ error: 'unauthorized' });
  });
});
