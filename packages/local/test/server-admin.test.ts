/**
 * The admin API behind the local HTTP server (`createRequestHandler`), over real HTTP on a loopback port, with a
 * store that answers stats only: who asks is checked before a body is read, and HEAD is answered as GET.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminHandler } from '@queuebox/admin';
import type { AdminStats, Store } from '@queuebox/core';
import type { Ingestion } from '@queuebox/inbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { createQueueBoxMetrics } from '../src/metrics.ts';
import { createRequestHandler } from '../src/server.ts';

const TOKEN = 'server-admin-token-0123456789';
const STATS: AdminStats = {
  outbox: {
    counts: { Pending: 1, Processing: 0, Sent: 2, Dead: 3, Failed: 0 },
    oldestPendingAgeMs: null,
    deadByTopic: { 'orders.paid': 3 },
  },
  inbox: {
    counts: { Pending: 0, Processing: 0, Sent: 0, Dead: 0, Failed: 0 },
    oldestPendingAgeMs: null,
    deadBySource: {},
  },
};

/** Stats answer; anything else fails the request that reached it (500). */
function statsOnlyStore(): Pick<Store, 'admin' | 'outbox' | 'inbox'> {
  const fail = (what: string) => () => Promise.reject(new Error(`the store was reached (${what})`));
  return {
    admin: {
      stats: async () => STATS,
      gauges: fail('gauges'),
      list: fail('list') as never,
      requeue: fail('requeue'),
      replay: fail('replay'),
      redact: fail('redact'),
      purge: fail('purge'),
      oldestPendingAgeMs: fail('oldestPendingAgeMs'),
      deadRows: fail('deadRows'),
      nextDue: fail('nextDue'),
    },
    outbox: { get: fail('outbox.get') } as never,
    inbox: { get: fail('inbox.get') } as never,
  };
}

const ingestion: Ingestion = {
  handle: () => Promise.reject(new Error('no inbox in this test')),
  ready: async () => {},
  routes: [],
  maxBodyBytes: 1024,
};

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer(
    createRequestHandler({
      ingestion,
      ping: async () => {},
      metrics: createQueueBoxMetrics(),
      logger: createLogger({ level: 'error', write: () => {} }),
      admin: createAdminHandler({ store: statsOnlyStore(), token: TOKEN }),
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function send(
  method: string,
  path: string,
  options: { token?: string; body?: string; chunked?: boolean } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: {
          ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
          ...(options.body === undefined || options.chunked === true
            ? {}
            : {
                'content-type': 'application/json',
                'content-length': String(Buffer.byteLength(options.body)),
              }),
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    if (options.chunked === true && options.body !== undefined) {
      // Two writes and no Content-Length: node:http sends the body chunked.
      req.write(options.body.slice(0, 1000));
      req.end(options.body.slice(1000));
    } else req.end(options.body);
  });
}

/** A JSON body of about 70 KB: over the admin API's 64 KiB limit. */
const LARGE = JSON.stringify({ all: true, padding: 'x'.repeat(70_000) });

describe('who asks is checked before the body is read', () => {
  it('answers an unauthenticated 70 KB POST 401 (it was 413)', async () => {
    const refused = await send('POST', '/admin/outbox/requeue', { body: LARGE });
    const wrongToken = await send('POST', '/admin/purge', { token: 'wrong', body: LARGE });

    for (const answer of [refused, wrongToken]) {
      expect(answer.status).toBe(401);
      expect(answer.headers['www-authenticate']).toBe('Bearer');
      expect(JSON.parse(answer.body)).toMatchObject({ error: 'unauthorized' });
    }
  });

  it('answers an authenticated 70 KB POST 413, as before', async () => {
    const answer = await send('POST', '/admin/outbox/requeue', { token: TOKEN, body: LARGE });

    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'payload_too_large' });
  });

  it('answers an unauthenticated chunked POST 401 too', async () => {
    const answer = await send('POST', '/admin/outbox/requeue', { body: LARGE, chunked: true });
    const allowed = await send('POST', '/admin/outbox/requeue', { token: TOKEN, body: LARGE, chunked: true });

    expect(answer.status).toBe(401);
    expect(allowed.status).toBe(413);
  });
});

describe('HEAD on the admin GET routes', () => {
  it('is answered as GET, without a body (it was 405)', async () => {
    const get = await send('GET', '/admin/stats', { token: TOKEN });
    const head = await send('HEAD', '/admin/stats', { token: TOKEN });

    expect(get.status).toBe(200);
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers['content-type']).toBe('application/json');
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(get.body)));
  });

  it('needs the token as GET does, and is 405 on a POST route as GET is', async () => {
    const anonymous = await send('HEAD', '/admin/stats');
    const onPost = await send('HEAD', '/admin/purge', { token: TOKEN });

    expect(anonymous.status).toBe(401);
    expect(onPost.status).toBe(405);
    expect(onPost.headers.allow).toBe('POST');
  });
});
