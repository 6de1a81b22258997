/**
 * The drain loop's pauses longer than one timer can wait (2^31 − 1 ms): Node fires such a `setTimeout` after 1 ms,
 * so a loop whose error pause grew past it (`maxErrorPauseMs: Infinity` after 25 failures) or whose poll interval is
 * that long drained without any pause, hammering a database that was down. Vitest's fake timers treat an overlong
 * delay as Node does (as 1 ms), so the loop runs on simulated time here.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startDrainLoop } from '../src/drain-loop.ts';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('startDrainLoop with pauses longer than a timer', () => {
  it('waits after a failure whose pause is beyond 2^31 − 1 ms, instead of draining again after 1 ms', async () => {
    const stop = new AbortController();
    let drains = 0;
    const loop = startDrainLoop({
      drain: async () => {
        drains += 1;
        throw new Error('the database is down');
      },
      isIdle: () => true,
      pollIntervalMs: 2 ** 31,
      maxErrorPauseMs: Number.POSITIVE_INFINITY,
      signal: stop.signal,
    });

    // Act: a simulated second, then a simulated day.
    await vi.advanceTimersByTimeAsync(1000);
    const afterASecond = drains;
    if (afterASecond > 1) stop.abort(); // the loop spins: stop it before a simulated day of 1 ms pauses
    await vi.advanceTimersByTimeAsync(24 * 3600 * 1000);
    const afterADay = drains;
    stop.abort();
    await loop.done;

    // Assess: one drain, then the pause.
    expect(afterASecond).toBe(1);
    expect(afterADay).toBe(1);
  });

  it('drains again after a pause of about 24.8 days at most, for an idle poll interval beyond it', async () => {
    const stop = new AbortController();
    let drains = 0;
    const loop = startDrainLoop({
      drain: async () => {
        drains += 1;
        return 'idle';
      },
      isIdle: () => true,
      pollIntervalMs: 30 * 24 * 3600 * 1000,
      signal: stop.signal,
    });

    await vi.advanceTimersByTimeAsync(1000);
    const afterASecond = drains;
    if (afterASecond > 1) stop.abort(); // the loop spins: stop it before 24.8 simulated days of 1 ms pauses
    await vi.advanceTimersByTimeAsync(2 ** 31 - 1002);
    const justBefore = drains;
    await vi.advanceTimersByTimeAsync(2);
    const after = drains;
    stop.abort();
    await loop.done;

    expect(afterASecond).toBe(1);
    expect(justBefore).toBe(1);
    expect(after).toBe(2);
  });
});
