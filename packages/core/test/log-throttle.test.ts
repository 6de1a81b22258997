import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogThrottle } from '../src/log-throttle.ts';
import type { LogFields } from '../src/ports/logger.ts';

describe('createLogThrottle', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const written: { n: number; extra: LogFields }[] = [];
  beforeEach(() => {
    written.length = 0;
  });
  const lineOf = (n: number) => (extra: LogFields) => written.push({ n, extra });

  it('writes the first line of a kind at once, counts the others, and writes the latest once with the count at the interval end', async () => {
    const throttle = createLogThrottle({ intervalMs: 1000 });
    for (let n = 1; n <= 500; n++) throttle.line('refused', lineOf(n));
    expect(written).toEqual([{ n: 1, extra: {} }]);

    await vi.advanceTimersByTimeAsync(1000);
    expect(written).toEqual([
      { n: 1, extra: {} },
      { n: 500, extra: { repeated: 499, repeatedInMs: 1000 } },
    ]);
    throttle.flush();
  });

  it('keeps one line an interval under constant repetition, and writes the next one at once after a quiet interval', async () => {
    const throttle = createLogThrottle({ intervalMs: 1000 });
    let n = 0;
    for (let second = 0; second < 3; second++) {
      for (let i = 0; i < 10; i++) throttle.line('refused', lineOf(++n));
      await vi.advanceTimersByTimeAsync(1000);
    }
    // The first at once, then one summary per interval: 9 counted, then 10, then 10.
    expect(written.map((w) => w.extra.repeated ?? 'first')).toEqual(['first', 9, 10, 10]);
    // A quiet interval forgets the kind.
    await vi.advanceTimersByTimeAsync(2000);
    throttle.line('refused', lineOf(++n));
    expect(written.at(-1)).toEqual({ n, extra: {} });
    throttle.flush();
  });

  it('throttles each kind on its own, lists the first values of `listed`, and bounds the kinds', async () => {
    const throttle = createLogThrottle({ intervalMs: 1000, maxKeys: 2, maxListed: 3 });
    for (let id = 1; id <= 6; id++) throttle.line('dead:a', lineOf(id), id);
    throttle.line('dead:b', lineOf(100));
    // Past maxKeys: one shared kind.
    throttle.line('dead:c', lineOf(200));
    throttle.line('dead:d', lineOf(300));
    expect(written.map((w) => w.n)).toEqual([1, 100, 200]);

    await vi.advanceTimersByTimeAsync(1000);
    expect(written.slice(3)).toEqual([
      { n: 6, extra: { repeated: 5, repeatedInMs: 1000, repeatedIds: [2, 3, 4] } },
      { n: 300, extra: { repeated: 1, repeatedInMs: 1000 } },
    ]);
    throttle.flush();
  });

  it('writes what was counted at flush (shutdown), and a line that throws breaks nothing', () => {
    const throttle = createLogThrottle({ intervalMs: 60_000 });
    throttle.line('k', () => {
      throw new Error('sink down');
    });
    throttle.line('k', lineOf(2));
    throttle.line('k', lineOf(3));
    throttle.flush();
    expect(written).toEqual([{ n: 3, extra: { repeated: 2, repeatedInMs: 60_000 } }]);
    // Forgotten: the next is written at once.
    throttle.line('k', lineOf(4));
    expect(written.at(-1)).toEqual({ n: 4, extra: {} });
    throttle.flush();
  });
});
