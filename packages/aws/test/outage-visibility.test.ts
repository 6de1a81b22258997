/**
 * The visibility timeout sqs-source gives a record it hands back during a store outage, against SQS's rule: a
 * message's visibility can be made at most 12 hours long in total, counted from its receive, and a
 * ChangeMessageVisibility asking for more is rejected (the record then returns after the queue's own timeout, its
 * outage protection lost). Between the receive and the call lie the event source mapping's batching window
 * (MaximumBatchingWindowInSeconds, up to 300 s), the invocations Lambda retries while the function is throttled
 * (why AWS asks for a queue visibility timeout of six times the function's), and the invocation's own run (up to
 * 900 s): all of it within the receive's visibility timeout, or the message is no longer in flight and no change is
 * possible anyway.
 */
import { describe, expect, it } from 'vitest';
import { outageVisibilitySeconds } from '../src/index.ts';

const TWELVE_HOURS = 43_200;

describe('outageVisibilitySeconds', () => {
  it('stays within 12 h of the receive after a 300 s batching window and a 900 s function that ran 850 s', () => {
    // The queue's visibility timeout as AWS advises for a 900 s function: six times it.
    const queueSeconds = 5400;
    const sinceReceive = 300 + 850;

    const seconds = outageVisibilitySeconds(queueSeconds, 10);

    expect(seconds).toBeDefined();
    expect(sinceReceive + (seconds ?? 0)).toBeLessThanOrEqual(TWELVE_HOURS);
  });

  it('never asks for more than 12 h from the receive, nor for less than the queue would have given', () => {
    for (const queueSeconds of [1, 30, 180, 900, 1200, 5400, 14_400, 21_600]) {
      for (let receiveCount = 1; receiveCount <= 40; receiveCount++) {
        const seconds = outageVisibilitySeconds(queueSeconds, receiveCount);
        expect(seconds, `VT ${queueSeconds} s, receive ${receiveCount}`).toBeDefined();
        // The latest possible call: just before the receive's visibility runs out.
        expect(queueSeconds + (seconds ?? 0)).toBeLessThanOrEqual(TWELVE_HOURS);
        expect(seconds).toBeGreaterThanOrEqual(queueSeconds);
      }
    }
  });

  it('doubles the queue visibility timeout per receive below the cap', () => {
    expect([1, 2, 3, 4, 5].map((n) => outageVisibilitySeconds(30, n))).toEqual([30, 60, 120, 240, 480]);
    expect(outageVisibilitySeconds(30, 40)).toBe(TWELVE_HOURS - 30);
  });

  it('leaves a queue of more than 6 h alone: any longer visibility could pass the 12 h', () => {
    expect(outageVisibilitySeconds(21_601, 1)).toBeUndefined();
    expect(outageVisibilitySeconds(TWELVE_HOURS, 3)).toBeUndefined();
  });
});
