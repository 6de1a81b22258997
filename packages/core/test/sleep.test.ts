/** `sleepUnlessAborted`: waits, ends early on abort, and leaves no listener on the signal either way. */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { sleepUnlessAborted } from '../src/sleep.ts';

describe('sleepUnlessAborted', () => {
  it('waits the time and removes its abort listener when the time is up', async () => {
    const controller = new AbortController();
    const started = performance.now();
    for (let i = 0; i < 20; i++) await sleepUnlessAborted(2, controller.signal);
    expect(performance.now() - started).toBeGreaterThanOrEqual(20 * 1.5);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('ends at once when the signal aborts, and at once when it already has', async () => {
    const controller = new AbortController();
    const started = performance.now();
    const waiting = sleepUnlessAborted(60_000, controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort();
    await waiting;
    await sleepUnlessAborted(60_000, controller.signal);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('waits without a signal', async () => {
    const started = performance.now();
    await sleepUnlessAborted(10);
    expect(performance.now() - started).toBeGreaterThanOrEqual(8);
  });
});
