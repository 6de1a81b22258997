/**
 * The local server's log line for a refused webhook carries the refusal's reason (a timestamp outside the tolerance,
 * no signature matching, …), which the HTTP answer never does: a partner's clock skew and a wrong secret look alike
 * to the sender and differ in the operator's log.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AdminHandler } from '@queuebox/admin';
import { createLogThrottle } from '@queuebox/core';
import type { Ingestion } from '@queuebox/inbox';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { createQueueBoxMetrics } from '../src/metrics.ts';
import { createRequestHandler } from '../src/server.ts';

const lines: Record<string, unknown>[] = [];
let server: Server;
let port: number;

const ingestion: Ingestion = {
  handle: async (request) =>
    request.path.endsWith('/shop')
      ? {
          status: 422,
          body: {
            error: 'transform_rejected',
            message:
              'The transform rejected the message: the transform failed: D3030 Unable to cast value to a number: "4111-1111-1111-1111"',
          },
          headers: {},
          outcome: 'transform_rejected',
          source: 'shop',
        }
      : {
          status: 401,
          body: { error: 'unauthorized', message: 'The request is not authenticated' },
          headers: {},
          outcome: 'unauthorized',
          source: 'stripe',
          refusal: {
            reason: 'timestamp_out_of_tolerance',
            detail: 'the signature timestamp is 900 s from now (tolerance 300 s)',
          },
        },
  ready: async () => {},
  routes: [
    { path: '/inbox/stripe', source: 'stripe' },
    { path: '/inbox/shop', source: 'shop' },
  ],
  maxBodyBytes: 1024,
};

beforeAll(async () => {
  server = createServer(
    createRequestHandler({
      ingestion,
      ping: async () => {},
      metrics: createQueueBoxMetrics({ sources: ['stripe', 'shop'] }),
      logger: createLogger({ level: 'info', write: (line) => lines.push(JSON.parse(line)) }),
      logThrottle: createLogThrottle({ intervalMs: 300 }),
      admin: {
        basePath: '/admin',
        handle: async () => ({ status: 401, body: { error: 'unauthorized' }, headers: {} }),
        unauthorized: async () => ({ status: 401, body: { error: 'unauthorized' }, headers: {} }),
      } as unknown as AdminHandler,
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const settle = () => new Promise((resolve) => setTimeout(resolve, 350));

function post(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
    });
    req.on('error', reject);
    req.end('{"id":"evt_1"}');
  });
}

it('logs the reason of a 401 and answers without it', async () => {
  // Act
  const answer = await post('/inbox/stripe');
  // Assess
  expect(answer.status).toBe(401);
  expect(answer.body).not.toContain('timestamp');
  expect(lines.filter((l) => l.message === 'inbox request refused')).toEqual([
    expect.objectContaining({
      level: 'WARN',
      source: 'stripe',
      status: 401,
      error: { code: 'unauthorized', message: 'The request is not authenticated' },
      reason: 'timestamp_out_of_tolerance',
      detail: 'the signature timestamp is 900 s from now (tolerance 300 s)',
    }),
  ]);
});

it('logs the code of a rejection by the transform, not its text, which may quote the payload', async () => {
  // Act
  const answer = await post('/inbox/shop');
  // Assess: the sender gets the text; the log line does not.
  expect(answer.status).toBe(422);
  expect(answer.body).toContain('4111-1111-1111-1111');
  const logged = lines.filter((l) => l.source === 'shop');
  expect(logged).toEqual([
    expect.objectContaining({
      message: 'inbox request refused',
      status: 422,
      error: { code: 'transform_rejected' },
    }),
  ]);
  expect(JSON.stringify(logged)).not.toContain('4111');
});

it('writes one refusal line of a kind an interval, then one with the count of the others', async () => {
  await settle();
  lines.length = 0;
  // Act: an outsider repeats a refused request.
  for (let i = 0; i < 40; i++) expect((await post('/inbox/stripe')).status).toBe(401);
  // Assess: the first at once, the 39 others as one line at the interval's end.
  expect(lines.filter((l) => l.message === 'inbox request refused')).toHaveLength(1);
  await settle();
  const refused = lines.filter((l) => l.message === 'inbox request refused');
  expect(refused).toHaveLength(2);
  expect(refused[1]).toEqual(
    expect.objectContaining({ source: 'stripe', status: 401, repeated: 39, repeatedInMs: 300 }),
  );
});

it('quotes at most 128 characters of an admin path an outsider chose, and throttles those lines too', async () => {
  await settle();
  lines.length = 0;
  const long = `/admin/${'a'.repeat(16_000)}`;
  for (let i = 0; i < 5; i++) expect((await post(long)).status).toBe(401);
  const refused = lines.filter((l) => l.message === 'admin request refused');
  expect(refused).toHaveLength(1);
  expect(refused[0]).toEqual(expect.objectContaining({ status: 401, pathLength: long.length }));
  expect(String(refused[0]?.path).length).toBeLessThanOrEqual(129);
  expect(JSON.stringify(lines).length).toBeLessThan(2_000);
});
