/**
 * The destination lines with the poller's wall clock stepped back (an NTP correction, a resumed VM): the rate limit
 * counts a step back as an interval passed (core's `intervalPassed`), and the durations logged are never negative.
 */
import type { LogFields, Logger } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createDestinationHealth, type DestinationSettle } from '../src/destination-health.ts';

describe('destination health lines with the wall clock stepped back', () => {
  it('still warns about a failing destination after a step back of an hour, with no negative duration', () => {
    // Prepare
    const lines: { level: string; message: string; fields: LogFields }[] = [];
    const at =
      (level: string) =>
      (message: string, fields: LogFields = {}) =>
        void lines.push({ level, message, fields });
    const logger: Logger = {
      debug: at('debug'),
      info: at('info'),
      warn: at('warn'),
      error: at('error'),
      child: () => logger,
    };
    let now = Date.parse('2026-12-07T05:00:00Z');
    const health = createDestinationHealth({ logger, clock: { now: () => now } });
    const settle = (byDestination: Record<string, DestinationSettle>) =>
      health.record(new Map(Object.entries(byDestination)));

    // Act: failing; the clock steps back an hour; still failing a minute later; then delivering
    settle({ billing: { failures: 1, lastError: 'HTTP 503', sent: 0 } });
    now -= 3_600_000;
    now += 60_000;
    settle({ billing: { failures: 2, lastError: 'HTTP 503', sent: 0 } });
    settle({ billing: { failures: 0, sent: 1 } });

    // Assess: before, the second WARN waited for the hour to pass again, and the durations were negative
    expect(lines.map((l) => [l.level, l.fields])).toEqual([
      ['warn', { destination: 'billing', error: 'HTTP 503', retries: 1, failingForMs: 0 }],
      ['warn', { destination: 'billing', error: 'HTTP 503', retries: 2, failingForMs: 0 }],
      ['info', { destination: 'billing', retries: 0, failedForMs: 0 }],
    ]);
  });
});
