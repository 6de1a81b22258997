import type { SettledOutboxRow } from '@queuebox/outbox';

/** What the settles of one drain did to the rows routed to one destination (or to all rows: a drain's totals). */
export interface DestinationCounts {
  /** Rows the destination accepted. */
  sent: number;
  /** Deliveries that failed and were scheduled again. */
  retried: number;
  /** Rows settled dead: their last attempt failed, or a transform dead-lettered them. */
  dead: number;
}

/**
 * Adds settled rows to `tally`, by the destination the router chose. Rows without one (no route matched: dead at
 * once; released rows: never tried) and released rows are left out: they belong to no destination, and the
 * counters without the dimension count them.
 */
export function tallyByDestination(
  tally: Map<string, DestinationCounts>,
  rows: readonly SettledOutboxRow[],
): void {
  for (const { outcome, destination } of rows) {
    if (destination === null || outcome === 'released') continue;
    let counts = tally.get(destination);
    if (counts === undefined) {
      counts = { sent: 0, retried: 0, dead: 0 };
      tally.set(destination, counts);
    }
    counts[outcome] += 1;
  }
}

/** {@link splitByDestination}'s answer. */
export interface DeliverySplit {
  /** The configured destinations that moved, by name, with their counts. */
  readonly byDestination: [string, DestinationCounts][];
  /** The totals less what `byDestination` holds (never below 0): rows of no destination, expired claims. */
  readonly rest: DestinationCounts;
}

/**
 * Splits a drain's `totals` into per-destination shares and the rest, so that each row is counted in exactly one
 * EMF document: a destination's document carries both dimension sets (`{ service }` and `{ service, Destination }`),
 * the rest only `{ service }`, and CloudWatch's `{ service }` series still sums to the totals (as does a Logs
 * Insights sum over the documents). Only configured destinations (`destinations`' own keys) that moved get a share:
 * the dimension's values are a closed set, at most what the configuration names; a name it does not hold stays in
 * the rest rather than becoming a new series.
 */
export function splitByDestination(
  totals: Readonly<DestinationCounts>,
  tally: ReadonlyMap<string, DestinationCounts>,
  destinations: Readonly<Record<string, unknown>>,
): DeliverySplit {
  const byDestination = [...tally]
    .filter(
      ([name, counts]) => Object.hasOwn(destinations, name) && counts.sent + counts.retried + counts.dead > 0,
    )
    .map(([name, counts]): [string, DestinationCounts] => [name, { ...counts }])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const given = (key: keyof DestinationCounts) => byDestination.reduce((n, [, counts]) => n + counts[key], 0);
  return {
    byDestination,
    rest: {
      sent: Math.max(0, totals.sent - given('sent')),
      retried: Math.max(0, totals.retried - given('retried')),
      dead: Math.max(0, totals.dead - given('dead')),
    },
  };
}
