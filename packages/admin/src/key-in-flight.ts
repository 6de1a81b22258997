/**
 * Dead keyed outbox rows a requeue leaves dead because a row of their key is being delivered (`key_in_flight`).
 * A claim takes a key's smallest pending-or-processing id when it is pending, so such a row, requeued, would be
 * claimed beside the later row still in delivery: two rows of one key in flight. The SQL stores report them beside
 * core's `RequeueResult.skipped`; a store that reports none leaves the field out. The HTTP API and the CLI word them here.
 */
import type { JsonValue, RequeueKeyInFlight, RequeueResult, RequeueSkipped } from '@queuebox/core';

export type { RequeueSkipped };

/** One row left dead: its key, and the row of that key being delivered (its smallest processing id). */
export type KeyInFlight = RequeueKeyInFlight;

/** What `result` says it left dead for `key_in_flight`, or undefined when nothing (or the store says nothing). */
export function requeueSkipped(result: RequeueResult): RequeueSkipped | undefined {
  const { skipped } = result;
  return skipped !== undefined && skipped.count > 0 ? skipped : undefined;
}

/** Why one row stays dead, for an operator. */
export function keyInFlightMessage(row: KeyInFlight): string {
  return `Outbox row ${row.id} stays dead: row ${row.processingId} of its key ${JSON.stringify(row.key)} is being delivered (processing), and a requeued row would be claimed beside it. Try again when that row settles`;
}

/** Why `skipped.count` rows stay dead, for an operator. */
export function skippedMessage(skipped: RequeueSkipped): string {
  const one = skipped.count === 1;
  return `${skipped.count} dead row${one ? ' stays' : 's stay'} dead: ${one ? 'it shares' : 'each shares'} its key with a row being delivered (processing), and requeued it would be claimed beside that row. Requeue again when ${one ? 'that row settles' : 'those rows settle'}`;
}

/** `skipped` as JSON: reason, count, the operator's message and the first rows. */
export function skippedView(skipped: RequeueSkipped): JsonValue {
  return {
    reason: skipped.reason,
    count: skipped.count,
    message: skippedMessage(skipped),
    rows: skipped.rows.map((row) => ({ id: row.id, key: row.key, processingId: row.processingId })),
  };
}
