/**
 * The wake-up invoker over the real `@aws-sdk/client-lambda`, pointed at an HTTP server on loopback that plays the
 * Lambda API: it must send an asynchronous (`Event`) invoke of the named function with the JSON payload.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLambdaInvoker } from '../src/lambda-invoker.ts';

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

describe('createLambdaInvoker', () => {
  const seen: Seen[] = [];
  let server: Server;
  let endpoint: string;

  beforeAll(async () => {
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        seen.push({
          method: request.method ?? '',
          url: request.url ?? '',
          headers: request.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        });
        // What Lambda answers to an accepted asynchronous invoke.
        response.writeHead(202, { 'content-type': 'application/json', 'x-amzn-requestid': 'req-1' });
        response.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('sends an Event invoke of the named function with the payload as JSON', async () => {
    const invoker = createLambdaInvoker({
      endpoint,
      region: 'eu-west-1',
      credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'test-secret' },
    });

    await invoker.invokeAsync('queuebox-dev-RelayTick', { trigger: 'wakeup' });

    expect(seen).toHaveLength(1);
    const [request] = seen;
    expect(request?.method).toBe('POST');
    expect(request?.url).toBe('/2015-03-31/functions/queuebox-dev-RelayTick/invocations');
    expect(request?.headers['x-amz-invocation-type']).toBe('Event');
    expect(JSON.parse(request?.body ?? '')).toEqual({ trigger: 'wakeup' });
    expect(request?.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDTEST\//);
  });

  it('rejects when Lambda refuses the invoke (the wake-up reports it and carries on)', async () => {
    const refusing = createServer((_request, response) => {
      response.writeHead(429, {
        'content-type': 'application/json',
        'x-amzn-errortype': 'TooManyRequestsException',
      });
      response.end(JSON.stringify({ message: 'Rate exceeded' }));
    });
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const invoker = createLambdaInvoker({
      endpoint: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`,
      region: 'eu-west-1',
      credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'test-secret' },
      maxAttempts: 1,
    });

    const invoke = invoker.invokeAsync('queuebox-dev-OutboxTick', { trigger: 'wakeup' });

    await expect(invoke).rejects.toThrow(/Rate exceeded|TooManyRequests/);
    await new Promise<void>((resolve) => refusing.close(() => resolve()));
  });
});
