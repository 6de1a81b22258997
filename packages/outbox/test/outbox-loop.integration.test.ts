import { setTimeout as sleep } from 'node:timers/promises';
import type { OutboxStore, RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { startOutboxLoop } from '../src/outbox-loop.ts';
import { aPoller, insert, receiver, rowOf, store, usePollerDatabase } from './support/poller-harness.ts';

usePollerDatabase();

describe('startOutboxLoop', () => {
  it('drains on wake-up, and on abort finishes the delivery in flight before returning', async () => {
    // Prepare
    const poller = aPoller();
    const controller = new AbortController();
    let answer: (() => void) | undefined;
    receiver.handle((_request, response) => {
      answer = () => response.writeHead(200).end();
    });
    // A long interval: only wake() can start the drain that finds the row soon.
    const loop = startOutboxLoop(poller, { pollIntervalMs: 60_000, signal: controller.signal });
    await sleep(50);
    const [id] = (await insert({})) as [RowId];
    // Act
    loop.wake();
    while (answer === undefined) await sleep(10);
    controller.abort();
    answer();
    await loop.done;
    // Assess
    expect(await rowOf(id)).toMatchObject({ state: 'Sent' });
    expect(receiver.requests).toHaveLength(1);
  });

  it('keeps running after a failed drain', async () => {
    // Prepare: a store whose first claim fails.
    let calls = 0;
    const real = store.outbox;
    const flaky: OutboxStore = {
      insert: (messages) => real.insert(messages),
      claim: async (options) => {
        calls++;
        if (calls === 1) throw new Error('connection reset');
        return real.claim(options);
      },
      markSent: (items) => real.markSent(items),
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: (limit) => real.reclaimExpired(limit),
    };
    const reports: string[] = [];
    const controller = new AbortController();
    const [id] = (await insert({})) as [RowId];
    // Act
    const loop = startOutboxLoop(aPoller({ store: flaky }), {
      pollIntervalMs: 10,
      signal: controller.signal,
      onDrain: (report) => {
        reports.push(report.stoppedFor);
        if (report.sent > 0) controller.abort();
      },
    });
    await loop.done;
    // Assess
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(reports.at(-1)).toBe('empty');
    expect(await rowOf(id)).toMatchObject({ state: 'Sent' });
  });
});
