import { describe, expect, it } from 'vitest';
import { createFailureTracker, failureKey, poisonLimits } from '../src/poison.ts';

describe('the failure tracker of broker messages', () => {
  const limits = { failures: 3, ms: 1000 };

  it('is exhausted once both the count and the age are reached', () => {
    const tracker = createFailureTracker();
    expect(tracker.fail('a', 0, limits)).toEqual({ count: 1, firstAt: 0, exhausted: false });
    expect(tracker.fail('a', 2000, limits).exhausted).toBe(false);
    expect(tracker.fail('a', 999, limits)).toEqual({ count: 3, firstAt: 0, exhausted: false });
    expect(tracker.fail('a', 1000, limits)).toEqual({ count: 4, firstAt: 0, exhausted: true });
  });

  it('counts a clock stepped back as time passed', () => {
    const tracker = createFailureTracker();
    tracker.fail('a', 5000, limits);
    tracker.fail('a', 5001, limits);
    expect(tracker.fail('a', 10, limits).exhausted).toBe(true);
  });

  it('counts each message on its own and forgets one on request', () => {
    const tracker = createFailureTracker();
    tracker.fail('a', 0, limits);
    tracker.fail('a', 0, limits);
    expect(tracker.fail('b', 0, limits).count).toBe(1);
    tracker.forget('a');
    expect(tracker.fail('a', 0, limits).count).toBe(1);
    expect(tracker.size).toBe(2);
  });

  it('keeps at most its capacity, forgetting the oldest message first', () => {
    const tracker = createFailureTracker(2);
    tracker.fail('a', 0, limits);
    tracker.fail('b', 0, limits);
    tracker.fail('b', 0, limits);
    tracker.fail('c', 0, limits);
    expect(tracker.size).toBe(2);
    expect(tracker.fail('b', 0, limits).count).toBe(3);
    expect(tracker.fail('a', 0, limits).count).toBe(1);
  });

  it('forgets the message whose last failure is the oldest, not the first one tracked', () => {
    const tracker = createFailureTracker(2);
    tracker.fail('a', 0, limits);
    tracker.fail('b', 0, limits);
    tracker.fail('a', 0, limits);
    tracker.fail('c', 0, limits);
    expect(tracker.fail('a', 0, limits).count).toBe(3);
    expect(tracker.fail('b', 0, limits).count).toBe(1);
  });

  it('identifies a message by source and key, or by body for a random key', () => {
    const body = new TextEncoder().encode('{"x":1}');
    expect(failureKey('s', 'k1', body)).not.toBe(failureKey('t', 'k1', body));
    expect(failureKey('s', 'random:1', body)).toBe(failureKey('s', 'random:2', body));
    expect(failureKey('s', 'random:1', body)).not.toBe(
      failureKey('s', 'random:1', new TextEncoder().encode('{"x":2}')),
    );
  });

  it('defaults to 10 failures over 5 minutes', () => {
    expect(poisonLimits({})).toEqual({ failures: 10, ms: 300_000 });
    expect(poisonLimits({ deadAfterFailures: 1, deadAfterMs: 0 })).toEqual({ failures: 1, ms: 0 });
  });
});
