/**
 * createOutboxWaker: the invoke it sends (through the real `@aws-sdk/client-lambda` against a loopback server that
 * answers like Lambda's Invoke API), merging of close wakes without losing the last one, and failures that never
 * throw.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createOutboxWaker, type OutboxWaker } from '../src/outbox-waker.ts';

const wakers: OutboxWaker[] = [];
afterEach(() => {
  for (const w of wakers.splice(0)) w.close();
});

function recorder() {
  const calls: { name: string; payload: unknown; at: number }[] = [];
  const invoke = async (name: string, payload: Uint8Array) => {
    calls.push({ name, payload: JSON.parse(new TextDecoder().decode(payload)), at: Date.now() });
  };
  return { calls, invoke };
}

describe('createOutboxWaker', () => {
  it('sends an asynchronous Invoke of outbox-tick with {"trigger":"wakeup"} through the Lambda API', async () => {
    // Prepare
    const seen: { path: string; type: string | undefined; body: string }[] = [];
    const lambda = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        seen.push({ path: req.url ?? '', type: req.headers['x-amz-invocation-type'] as string, body });
        res.writeHead(202, { 'content-type': 'application/json' }).end();
      });
    });
    await new Promise<void>((r) => lambda.listen(0, '127.0.0.1', r));
    const waker = createOutboxWaker({
      functionName: 'queuebox-prod-OutboxTick',
      lambda: {
        endpoint: `http://127.0.0.1:${(lambda.address() as AddressInfo).port}`,
        region: 'us-east-1',
        credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      },
    });
    wakers.push(waker);

    // Act
    const sent = await waker.wake();
    lambda.close();

    // Assess
    expect(sent).toBe(true);
    expect(seen).toEqual([
      {
        path: '/2015-03-31/functions/queuebox-prod-OutboxTick/invocations',
        type: 'Event',
        body: '{"trigger":"wakeup"}',
      },
    ]);
  });

  it('merges wakes within the interval into one trailing wake, so the last commit is never left waiting', async () => {
    // Prepare
    const { calls, invoke } = recorder();
    const waker = createOutboxWaker({ functionName: 'f', minIntervalMs: 200, invoke });
    wakers.push(waker);

    // Act
    const first = await waker.wake();
    const burst = await Promise.all(Array.from({ length: 10 }, () => waker.wake()));

    // Assess
    expect(first).toBe(true);
    expect(burst).toEqual(Array(10).fill(true));
    expect(calls).toHaveLength(2);
    expect(calls.map((c) => c.payload)).toEqual([{ trigger: 'wakeup' }, { trigger: 'wakeup' }]);
    expect((calls[1]?.at ?? 0) - (calls[0]?.at ?? 0)).toBeGreaterThanOrEqual(190);
  });

  it('answers false and reports a failed or hung invoke instead of throwing', async () => {
    // Prepare
    const errors: unknown[] = [];
    const waker = createOutboxWaker({
      functionName: 'f',
      invoke: async () => {
        throw new Error('AccessDeniedException: not allowed to invoke');
      },
      onError: (e) => errors.push(e),
    });
    // A Lambda endpoint that accepts the connection and never answers.
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const hung = createOutboxWaker({
      functionName: 'f',
      timeoutMs: 300,
      lambda: {
        endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
        region: 'us-east-1',
        credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      },
      onError: (e) => errors.push(e),
    });
    wakers.push(waker, hung);

    // Act
    const started = Date.now();
    const results = [await waker.wake(), await hung.wake()];

    silent.closeAllConnections();
    silent.close();

    // Assess
    expect(results).toEqual([false, false]);
    expect(errors).toHaveLength(2);
    expect(Date.now() - started).toBeLessThan(2_500);
  });

  it('needs a function name', () => {
    const before = process.env.OUTBOX_TICK_FUNCTION_NAME;
    delete process.env.OUTBOX_TICK_FUNCTION_NAME;
    try {
      expect(() => createOutboxWaker()).toThrow(/outboxTickFunction/);
    } finally {
      if (before !== undefined) process.env.OUTBOX_TICK_FUNCTION_NAME = before;
    }
  });
});
