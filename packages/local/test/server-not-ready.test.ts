/**
 * The local HTTP server before the runtime is ready (it waits for its database at start, or migrates it): `/health`
 * answers 503 without asking the database, a POST to a source 503 `store_unavailable` with `Retry-After` and is not
 * handed to the ingestion, `/admin` 503; `/metrics` answers as usual. Once ready, everything answers as before.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminHandler } from '@queuebox/admin';
import type { Store } from '@queuebox/core';
import type { Ingestion } from '@queuebox/inbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { createQueueBoxMetrics } from '../src/metrics.ts';
import { createRequestHandler } from '../src/server.ts';

const TOKEN = 'server-not-ready-token-0123456789';

let ready = false;
let pings = 0;
let handled = 0;
let adminReached = 0;
let server: Server;
let port: number;
const metrics = createQueueBoxMetrics({ sources: ['demo'] });

const ingestion: Ingestion = {
  handle: async () => {
    handled++;
    return { status: 202, body: { status: 'accepted' }, headers: {}, outcome: 'accepted', source: 'demo' };
  },
  ready: async () => {},
  routes: [{ path: '/inbox/demo', source: 'demo' }],
  maxBodyBytes: 1024,
};

const store = {
  admin: {
    stats: async () => {
      adminReached++;
      throw new Error('the store was reached');
    },
  },
} as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>;

beforeAll(async () => {
  server = createServer(
    createRequestHandler({
      ingestion,
      ping: async () => {
        pings++;
      },
      metrics,
      logger: createLogger({ level: 'error', write: () => {} }),
      admin: createAdminHandler({ store, token: TOKEN }),
      isReady: () => ready,
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

function send(method: string, path: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('the local server while the runtime waits for its database', () => {
  it('answers /health 503 "starting" without asking the database', async () => {
    ready = false;
    const answer = await send('GET', '/health');
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toEqual({ status: 'starting', error: 'store_unavailable' });
    expect(pings).toBe(0);
    expect((await send('HEAD', '/health')).status).toBe(503);
  });

  it('refuses a POST to a source with 503 store_unavailable and Retry-After, and stores nothing', async () => {
    ready = false;
    const answer = await send('POST', '/inbox/demo', '{"type":"a.b"}');
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('5');
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'store_unavailable' });
    expect(handled).toBe(0);
    expect(await metrics.registry.metrics()).toContain(
      'queuebox_inbox_rejected_total{reason="store_unavailable",source="demo"} 1',
    );
  });

  it('answers /admin 503 without reaching the store, and /metrics as usual', async () => {
    ready = false;
    const admin = await send('GET', '/admin/stats');
    expect(admin.status).toBe(503);
    expect(JSON.parse(admin.body)).toMatchObject({ error: 'store_unavailable' });
    expect(adminReached).toBe(0);
    expect((await send('GET', '/metrics')).status).toBe(200);
  });

  it('answers as usual once ready', async () => {
    ready = true;
    expect((await send('GET', '/health')).status).toBe(200);
    expect(pings).toBe(1);
    expect((await send('POST', '/inbox/demo', '{"type":"a.b"}')).status).toBe(202);
    expect(handled).toBe(1);
    await send('GET', '/admin/stats');
    expect(adminReached).toBe(1);
  });
});
