/**
 * The retention loop on a scripted admin store (the ages and batches on PostgreSQL are
 * retention.postgres.integration.test.ts): a store that never runs out of old rows still ends the run at its
 * deadline.
 */
import type { AdminStore, Clock } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { type RetentionBatch, runRetention } from '../src/retention.ts';

const HOUR_MS = 3_600_000;

/**
 * A clock that reads `step` ms later each time, and fails the run once read `limit` times: a loop that no longer
 * looks at the deadline spins without awaiting anything, which no test timeout could stop.
 */
function steppingClock(
  step: number,
  limit: number,
): Clock & {
  readonly reads: () => number;
  readonly current: () => number;
  readonly advance: (ms: number) => void;
} {
  let now = 0;
  let reads = 0;
  return {
    now: () => {
      reads += 1;
      if (reads > limit)
        throw new Error(`the clock was read ${reads} times: the retention loop does not end`);
      now += step;
      return now;
    },
    reads: () => reads,
    current: () => now,
    advance: (ms) => {
      now += ms;
    },
  };
}

/** An admin store whose every purge deletes a full batch in 10 ms, noting the time it was asked at. */
function alwaysFullStore(clock: { readonly current: () => number; readonly advance: (ms: number) => void }) {
  const calledAt: number[] = [];
  const admin = {
    purge: async ({ batchSize }: { batchSize: number }) => {
      calledAt.push(clock.current());
      clock.advance(10);
      return batchSize;
    },
  } as unknown as AdminStore;
  return { admin, calledAt };
}

describe('runRetention', () => {
  it('ends at the deadline, incomplete, when every batch comes back full', { timeout: 5_000 }, async () => {
    // Prepare
    const clock = steppingClock(10, 10_000);
    const { admin, calledAt } = alwaysFullStore(clock);
    const batches: RetentionBatch[] = [];

    // Act
    const report = await runRetention(admin, {
      keepSentMs: HOUR_MS,
      keepDeadMs: HOUR_MS,
      batchSize: 5,
      deadline: 1_025,
      clock,
      onBatch: (b) => batches.push(b),
    });

    // Assess
    expect(report.complete).toBe(false);
    expect(report.batches).toBeGreaterThan(0);
    expect(report.batches).toBe(batches.length);
    expect(report.total).toBe(5 * report.batches);
    expect(clock.reads()).toBeLessThan(1_000);
    // No batch started at or after the deadline, which falls within a round of the four kinds.
    expect(Math.max(...calledAt)).toBeLessThan(1_025);
  });
});
