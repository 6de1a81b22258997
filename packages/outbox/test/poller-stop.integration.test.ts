/**
 * A stop that lands while a claim is out: the claimed rows are given back untried. When that release fails (the
 * database went away at shutdown), the drain still ends on its normal path, so the requests in flight finish and
 * settle before the drain fails and before `close()` resolves: the runtime closes publishers and store only then.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { OutboxStore, RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  aPoller,
  destinationsFor,
  insert,
  receiver,
  rowOf,
  soon,
  store,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

describe('createOutboxPoller stopped while a claim is out', () => {
  it('waits for the requests in flight before failing, when giving the claimed rows back fails', async () => {
    // Prepare: row a is delivered slowly (0.6 s); the second claim is held until close() was called, then returns
    // row b, whose release fails.
    receiver.handle(async (_request, response) => {
      await sleep(600);
      response.writeHead(204).end();
    });
    let claims = 0;
    let openGate: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const outbox: OutboxStore = {
      ...store.outbox,
      claim: async (options) => {
        claims += 1;
        if (claims === 2) await gate;
        return store.outbox.claim(options);
      },
      release: async () => {
        throw new Error('connection terminated (test)');
      },
    };
    const [a] = (await insert({ key: 'a' })) as [RowId];
    const poller = aPoller({ store: outbox, destinations: destinationsFor({ timeoutMs: 5000 }) });
    const events: string[] = [];
    const drained = poller.drain(soon()).then(
      () => events.push('drain resolved'),
      (error: unknown) => events.push(`drain failed: ${(error as Error).message}`),
    );
    while (receiver.requests.length === 0) await sleep(5);
    const [b] = (await insert({ key: 'b' })) as [RowId];
    poller.wake?.();
    while (claims < 2) await sleep(5);

    // Act
    const closed = poller.close().then(() => events.push('close resolved'));
    openGate();
    await Promise.all([drained, closed]);

    // Assess: a's request finished and settled before the drain failed and before close() resolved; b was never sent.
    expect(events).toEqual(['drain failed: connection terminated (test)', 'close resolved']);
    expect(await rowOf(a)).toMatchObject({ state: 'Sent' });
    expect(receiver.requests).toHaveLength(1);
    expect((await rowOf(b)).state).toBe('Processing');
  });
});
