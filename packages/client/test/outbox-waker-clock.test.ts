import { afterEach, describe, expect, it, vi } from 'vitest';
import { createOutboxWaker } from '../src/index.ts';

describe('the outbox waker and the wall clock', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('is not held up by a wall clock stepped back (an NTP correction)', async () => {
    // Prepare: a waker whose first wake went out; then the wall clock steps back a minute
    const sent: number[] = [];
    const waker = createOutboxWaker({
      functionName: 'outbox-tick',
      minIntervalMs: 50,
      invoke: async () => {
        sent.push(performance.now());
      },
    });
    expect(await waker.wake()).toBe(true);
    const real = Date.now.bind(Date);
    vi.spyOn(Date, 'now').mockImplementation(() => real() - 60_000);
    await new Promise((resolve) => setTimeout(resolve, 60));

    // Act: the next wake, past the minimum interval; before, it waited as long as the step
    const outcome = await Promise.race([
      waker.wake(),
      new Promise<'held up'>((resolve) => setTimeout(() => resolve('held up'), 2_000).unref()),
    ]);
    waker.close();

    // Assess
    expect(outcome).toBe(true);
    expect(sent).toHaveLength(2);
  });
});
