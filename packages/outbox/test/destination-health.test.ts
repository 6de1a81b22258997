/**
 * The rate limit of the destination lines, settle by settle with a clock moved by hand: destinations apart, a
 * flapping destination, a settle with both failures and sends.
 */
import type { LogFields, Logger } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createDestinationHealth, type DestinationSettle } from '../src/destination-health.ts';

function setUp() {
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
  let now = 1_000_000;
  const health = createDestinationHealth({ logger, clock: { now: () => now } });
  const settle = (at: number, byDestination: Record<string, DestinationSettle>) => {
    now = 1_000_000 + at;
    health.record(new Map(Object.entries(byDestination)));
  };
  return { lines, settle };
}

const failed = (failures: number, lastError = 'HTTP 503: busy'): DestinationSettle => ({
  failures,
  lastError,
  sent: 0,
});
const sent = (n: number): DestinationSettle => ({ failures: 0, sent: n });

describe('destination health lines', () => {
  it('keeps one minute per destination, and counts every failure into the next line', () => {
    const { lines, settle } = setUp();

    settle(0, { billing: failed(3), crm: sent(5) });
    settle(10_000, { billing: failed(2, 'connect ECONNREFUSED 127.0.0.1:9'), crm: failed(1) });
    settle(59_999, { billing: failed(1, 'timeout') });
    settle(60_000, { billing: failed(4, 'HTTP 502: bad gateway') });

    expect(lines.map((l) => [l.level, l.message, l.fields])).toEqual([
      [
        'warn',
        'outbox destination failing',
        { destination: 'billing', error: 'HTTP 503: busy', retries: 3, failingForMs: 0 },
      ],
      [
        'warn',
        'outbox destination failing',
        { destination: 'crm', error: 'HTTP 503: busy', retries: 1, failingForMs: 0 },
      ],
      [
        'warn',
        'outbox destination failing',
        { destination: 'billing', error: 'HTTP 502: bad gateway', retries: 7, failingForMs: 60_000 },
      ],
    ]);
  });

  it('says a destination delivers again only after a WARN, and not while a settle still has failures of it', () => {
    const { lines, settle } = setUp();

    settle(0, { hooks: sent(2) }); // never failed: nothing to say
    settle(1_000, { hooks: failed(1) }); // WARN
    settle(2_000, { hooks: { failures: 1, lastError: 'HTTP 503: busy', sent: 3 } }); // still failing some: counted
    settle(3_000, { hooks: sent(1) }); // INFO, with the retry not written yet
    settle(4_000, { hooks: failed(2) }); // within the minute of the WARN: counted, no line
    settle(5_000, { hooks: sent(1) }); // no WARN since the INFO: nothing to say
    settle(61_000, { hooks: failed(1) }); // WARN with the three since the INFO

    expect(lines.map((l) => [l.level, l.message, l.fields])).toEqual([
      [
        'warn',
        'outbox destination failing',
        { destination: 'hooks', error: 'HTTP 503: busy', retries: 1, failingForMs: 0 },
      ],
      ['info', 'outbox destination delivers again', { destination: 'hooks', retries: 1, failedForMs: 2_000 }],
      [
        'warn',
        'outbox destination failing',
        { destination: 'hooks', error: 'HTTP 503: busy', retries: 3, failingForMs: 0 },
      ],
    ]);
  });
});
