import { describe, expect, it } from 'vitest';
import { backoffDelay, parseRetryAfter, resolveBackoff, retryDelay } from '../src/backoff.ts';

const aPolicy = (over: Partial<{ baseMs: number; maxMs: number }> = {}) => ({
  baseMs: 1000,
  maxMs: 60_000,
  ...over,
});
const fixed = (value: number) => () => value;

describe('backoffDelay (equal jitter)', () => {
  it('doubles the ceiling per attempt; random 1 reaches the ceiling, random 0 its half', () => {
    // Prepare
    const policy = aPolicy();
    // Act
    const high = [1, 2, 3, 4].map((a) => backoffDelay(a, policy, fixed(1)));
    const low = [1, 2, 3, 4].map((a) => backoffDelay(a, policy, fixed(0)));
    // Assess
    expect(high).toEqual([1000, 2000, 4000, 8000]);
    expect(low).toEqual([500, 1000, 2000, 4000]);
  });

  it('never exceeds maxMs, even for a huge attempt number', () => {
    const policy = aPolicy({ maxMs: 5000 });
    expect(backoffDelay(10, policy, fixed(1))).toBe(5000);
    expect(backoffDelay(5000, policy, fixed(1))).toBe(5000);
    expect(backoffDelay(5000, policy, fixed(0))).toBe(2500);
  });

  it('treats attempt 0 or less like the first attempt', () => {
    expect(backoffDelay(0, aPolicy(), fixed(1))).toBe(1000);
  });

  it('stays within [ceiling/2, ceiling] with the real random source', () => {
    for (let i = 0; i < 200; i++) {
      const delay = backoffDelay(3, aPolicy());
      expect(delay).toBeGreaterThanOrEqual(2000);
      expect(delay).toBeLessThanOrEqual(4000);
    }
  });
});

describe('retryDelay', () => {
  it('uses the backoff when there is no Retry-After', () => {
    expect(retryDelay({ attempt: 2, policy: aPolicy(), random: fixed(1) })).toBe(2000);
  });

  it('honours a longer Retry-After', () => {
    expect(retryDelay({ attempt: 1, policy: aPolicy(), retryAfterMs: 30_000, random: fixed(1) })).toBe(
      30_000,
    );
  });

  it('caps a Retry-After at maxMs', () => {
    expect(retryDelay({ attempt: 1, policy: aPolicy(), retryAfterMs: 3_600_000, random: fixed(1) })).toBe(
      60_000,
    );
  });

  it('does not shorten the backoff for a shorter Retry-After', () => {
    expect(retryDelay({ attempt: 4, policy: aPolicy(), retryAfterMs: 0, random: fixed(1) })).toBe(8000);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-11-30T12:00:00Z');

  it.each([
    ['120', 120_000],
    [' 0 ', 0],
    ['Mon, 30 Nov 2026 12:00:30 GMT', 30_000],
    ['Mon, 30 Nov 2026 11:00:00 GMT', 0],
  ])('reads "%s" as %i ms', (value, expected) => {
    expect(parseRetryAfter(value, now)).toBe(expected);
  });

  it.each(['UTC', 'America/Los_Angeles', 'Asia/Kathmandu'])(
    'reads the obsolete HTTP-date forms in GMT whatever the process time zone (%s)',
    (zone) => {
      const before = process.env.TZ;
      process.env.TZ = zone;
      try {
        expect(parseRetryAfter('Mon Nov 30 12:00:30 2026', now)).toBe(30_000);
        expect(parseRetryAfter('Monday, 30-Nov-26 12:00:30 GMT', now)).toBe(30_000);
        expect(parseRetryAfter('Mon, 30 Nov 2026 12:00:30 GMT', now)).toBe(30_000);
      } finally {
        if (before === undefined) delete process.env.TZ;
        else process.env.TZ = before;
      }
    },
  );

  it.each([null, undefined, '', '-1', '1.5', 'soon', 'Mon, 99 Foo 2026'])('ignores %j', (value) => {
    expect(parseRetryAfter(value, now)).toBeUndefined();
  });
});

describe('resolveBackoff', () => {
  it('takes the destination fields over the outbox ones, field by field', () => {
    expect(resolveBackoff({ baseMs: 1000, maxMs: 600_000 }, { maxMs: 5000 })).toEqual({
      baseMs: 1000,
      maxMs: 5000,
    });
    expect(resolveBackoff({ baseMs: 1000, maxMs: 600_000 }, undefined)).toEqual({
      baseMs: 1000,
      maxMs: 600_000,
    });
    expect(resolveBackoff(undefined, { baseMs: 10 })).toEqual({ baseMs: 10, maxMs: 600_000 });
  });
});
