import type { OutboxRow } from '@queuebox/core';
import type { SettledOutboxRow } from '@queuebox/outbox';
import { describe, expect, it } from 'vitest';
import { type DestinationCounts, splitByDestination, tallyByDestination } from '../src/delivery-metrics.ts';

/** A settled row: only `outcome` and `destination` matter to the tally. */
const settled = (outcome: SettledOutboxRow['outcome'], destination: string | null): SettledOutboxRow => ({
  row: { id: '1' } as unknown as OutboxRow,
  outcome,
  destination,
  settledAt: 0,
  latencyMs: 0,
});

describe('tallyByDestination', () => {
  it('counts sent, retried and dead rows by the destination the router chose, across settles', () => {
    const tally = new Map<string, DestinationCounts>();

    tallyByDestination(tally, [settled('sent', 'a'), settled('retried', 'b'), settled('dead', 'b')]);
    tallyByDestination(tally, [settled('sent', 'a'), settled('retried', 'b')]);

    expect(Object.fromEntries(tally)).toEqual({
      a: { sent: 2, retried: 0, dead: 0 },
      b: { sent: 0, retried: 2, dead: 1 },
    });
  });

  it('leaves out rows without a destination (no route matched) and released rows (never tried)', () => {
    const tally = new Map<string, DestinationCounts>();

    tallyByDestination(tally, [settled('dead', null), settled('released', null), settled('released', 'a')]);

    expect(tally.size).toBe(0);
  });
});

describe('splitByDestination', () => {
  it('shares configured destinations that moved, by name; the rest keeps what no share holds', () => {
    const tally = new Map<string, DestinationCounts>([
      ['zeta', { sent: 1, retried: 0, dead: 0 }],
      ['alpha', { sent: 0, retried: 3, dead: 1 }],
      ['idle', { sent: 0, retried: 0, dead: 0 }],
      ['gone', { sent: 0, retried: 1, dead: 0 }],
      // An inherited name is not a configured destination either.
      ['toString', { sent: 0, retried: 1, dead: 0 }],
    ]);

    // Totals of the drain: 2 more retried (expired claims returned, gone's and toString's rows), 2 more dead.
    const split = splitByDestination({ sent: 1, retried: 5, dead: 3 }, tally, {
      alpha: {},
      idle: {},
      zeta: {},
    });

    expect(split.byDestination).toEqual([
      ['alpha', { sent: 0, retried: 3, dead: 1 }],
      ['zeta', { sent: 1, retried: 0, dead: 0 }],
    ]);
    expect(split.rest).toEqual({ sent: 0, retried: 2, dead: 2 });
  });

  it('never answers a rest below 0', () => {
    const tally = new Map<string, DestinationCounts>([['alpha', { sent: 2, retried: 0, dead: 0 }]]);

    expect(splitByDestination({ sent: 1, retried: 0, dead: 0 }, tally, { alpha: {} }).rest).toEqual({
      sent: 0,
      retried: 0,
      dead: 0,
    });
  });
});
