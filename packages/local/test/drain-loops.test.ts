/** The `relay drain` log line: what it lists, and that it stays small when one drain forwards thousands of rows. */
import type { RelayDrainReport } from '@queuebox/inbox';
import { describe, expect, it } from 'vitest';
import { LISTED_OUTBOX_IDS, relayDrainSummary } from '../src/drain-loops.ts';

function aReport(forwarded: number, overrides: Partial<RelayDrainReport> = {}): RelayDrainReport {
  return {
    enabled: true,
    reclaimed: { returned: 0, dead: 0 },
    batches: 1,
    claimed: forwarded,
    forwarded,
    dead: 0,
    stale: 0,
    outboxIds: Array.from({ length: forwarded }, (_, i) => String(i + 1)),
    stoppedFor: 'empty',
    ...overrides,
  };
}

describe('relayDrainSummary', () => {
  it('writes no line for a drain that did nothing', () => {
    expect(relayDrainSummary(aReport(0))).toBeUndefined();
  });

  it('lists every outbox id of a small drain', () => {
    expect(relayDrainSummary(aReport(1))).toEqual({
      forwarded: 1,
      dead: 0,
      stale: 0,
      reclaimed: 0,
      outboxIds: ['1'],
    });
    expect(relayDrainSummary(aReport(LISTED_OUTBOX_IDS))?.outboxIds).toHaveLength(LISTED_OUTBOX_IDS);
  });

  it('lists the first ids of a large drain and counts the others', () => {
    const summary = relayDrainSummary(aReport(20_000));
    expect(summary).toMatchObject({
      forwarded: 20_000,
      outboxIds: Array.from({ length: LISTED_OUTBOX_IDS }, (_, i) => String(i + 1)),
      outboxIdsNotListed: 20_000 - LISTED_OUTBOX_IDS,
    });
    expect(JSON.stringify(summary).length).toBeLessThan(400);
  });

  it('writes a line for a drain that only reclaimed or found stale claims', () => {
    expect(relayDrainSummary(aReport(0, { reclaimed: { returned: 2, dead: 0 } }))).toMatchObject({
      reclaimed: 2,
    });
    expect(relayDrainSummary(aReport(0, { stale: 1 }))).toMatchObject({ stale: 1 });
  });
});
