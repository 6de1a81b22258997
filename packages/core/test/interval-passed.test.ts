import { describe, expect, it } from 'vitest';
import { intervalPassed } from '../src/index.ts';

describe('intervalPassed', () => {
  it('passes after the interval, and at once when the clock stepped back; not in between', () => {
    expect(intervalPassed(10_000, 9_000, 1_000)).toBe(true);
    expect(intervalPassed(9_999, 9_000, 1_000)).toBe(false);
    expect(intervalPassed(9_000, 9_000, 1_000)).toBe(false);
    // The relay's and the poller's reclaim, and the wake-up debounce, after a step of an hour back.
    expect(intervalPassed(9_000 - 3_600_000, 9_000, 1_000)).toBe(true);
    expect(intervalPassed(0, 0, 0)).toBe(true);
  });
});
