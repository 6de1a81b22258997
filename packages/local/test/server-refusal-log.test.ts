/**
 * The local server's log line for a refused webhook carries the refusal's reason (a timestamp outside the tolerance,
 * no signature matching, …), which the HTTP answer never does: a partner's clock skew and a wrong secret look alike
 * to the sender and differ in the operator's log.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

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
