/**
 * Dead rows a requeue leaves dead, and why, for an operator:
 *
 * - `key_in_flight`: a row of their key is being delivered. A claim takes a key's smallest pending-or-processing id
 *   when it is pending, so such a row, requeued, would be claimed beside the later row still in delivery: two rows
 *   of one key in flight. On the inbox, the same for a row whose source and aggregate id has a row with the relay
 *   (or a pull worker): requeued, it would be forwarded after that later row. Reported for the whole selection
 *   (`RequeueResult.skipped`).
 * - `key_busy`: another transaction held their key's insert lock (an application's enqueue of the key that has not
 *   committed yet, or another requeue or replay of it), or their key's head, its next row to deliver (a claim or
 *   settle of that row at that moment). The requeue takes both without waiting, so it never holds up the writers of
 *   the keys it has locked while it waits for one it has not, and is in no deadlock with the runtime's settles; such
 *   rows stay dead until a requeue finds the key free, usually a moment later. Reported for the rows the batch chose
 *   (`RequeueResult.keyBusy`).
 *
 * The SQL stores fill both fields of core's `RequeueResult`; a store that reports none leaves them out. The HTTP
 * API and the CLI word them here.
 */
import type {
  JsonValue,
  RequeueBusy,
  RequeueKeyBusy,
  RequeueKeyInFlight,
  RequeueResult,
  RequeueSkipped,
  Table,
} from '@queuebox/core';

export type { RequeueBusy, RequeueSkipped };

/** One row left dead: its key, and the row of that key being delivered (its smallest processing id). */
export type KeyInFlight = RequeueKeyInFlight;

/** What `result` says it left dead for `key_in_flight`, or undefined when nothing (or the store says nothing). */
export function requeueSkipped(result: RequeueResult): RequeueSkipped | undefined {
  const { skipped } = result;
  return skipped !== undefined && skipped.count > 0 ? skipped : undefined;
}

/** Why one row of `table` stays dead, for an operator. */
export function keyInFlightMessage(row: KeyInFlight, table: Table = 'outbox'): string {
  return table === 'outbox'
    ? `Outbox row ${row.id} stays dead: row ${row.processingId} of its key ${JSON.stringify(row.key)} is being delivered (processing), and a requeued row would be claimed beside it. Try again when that row settles`
    : `Inbox row ${row.id} stays dead: row ${row.processingId} of its source and aggregate id ${JSON.stringify(row.key)} is with the relay or a worker (processing), and a requeued row would be forwarded after it. Try again when that row settles`;
}

/** Why `skipped.count` rows of `table` stay dead, for an operator. */
export function skippedMessage(skipped: RequeueSkipped, table: Table = 'outbox'): string {
  const one = skipped.count === 1;
  const why =
    table === 'outbox'
      ? `${one ? 'it shares' : 'each shares'} its key with a row being delivered (processing), and requeued it would be claimed beside that row`
      : `${one ? 'it shares' : 'each shares'} its source and aggregate id with a row the relay or a worker holds (processing), and requeued it would be forwarded after that row`;
  return `${skipped.count} dead row${one ? ' stays' : 's stay'} dead: ${why}. Requeue again when ${one ? 'that row settles' : 'those rows settle'}`;
}

/** `skipped` as JSON: reason, count, the operator's message and the first rows (`key`: the aggregate id on the inbox). */
export function skippedView(skipped: RequeueSkipped, table: Table = 'outbox'): JsonValue {
  return {
    reason: skipped.reason,
    count: skipped.count,
    message: skippedMessage(skipped, table),
    rows: skipped.rows.map((row) => ({ id: row.id, key: row.key, processingId: row.processingId })),
  };
}

/** One row left dead because another transaction held its key's insert lock or its key's head (next row to deliver). */
export type KeyBusy = RequeueKeyBusy;

/** What `result` says it left dead for `key_busy`, or undefined when nothing (or the store says nothing). */
export function requeueBusy(result: RequeueResult): RequeueBusy | undefined {
  const { keyBusy } = result;
  return keyBusy !== undefined && keyBusy.count > 0 ? keyBusy : undefined;
}

/** Why one row stays dead for `key_busy`, for an operator. */
export function keyBusyMessage(row: KeyBusy): string {
  return `Outbox row ${row.id} stays dead: another transaction holds the insert lock of its key ${JSON.stringify(row.key)} (an application's enqueue of that key that has not committed yet, or another requeue or replay of it) or the key's next row to deliver (a claim or settle of that row at this moment), and a requeue does not wait for either. Try again in a moment`;
}

/** Why a replay of outbox row `id` copied nothing for `key_busy`, for an operator. */
export function replayKeyBusyMessage(id: string, key: string): string {
  return `Outbox row ${id} was not replayed: another transaction holds the insert lock of its key ${JSON.stringify(key)} (an application's enqueue of that key that has not committed yet, or a requeue or replay of it), and a replay does not wait for it. Try again in a moment`;
}

/** Why `busy.count` rows stay dead for `key_busy`, for an operator. */
export function busyMessage(busy: RequeueBusy): string {
  const one = busy.count === 1;
  return `${busy.count} dead row${one ? ' stays' : 's stay'} dead: another transaction held the insert lock of ${one ? 'its key' : 'their keys'} (an application's enqueue not yet committed, or another requeue or replay) or ${one ? "its key's" : "their keys'"} next row to deliver (a claim or settle of it at that moment), and a requeue does not wait for either. Requeue again in a moment`;
}

/** `keyBusy` as JSON: reason, count, the operator's message and the first rows. */
export function busyView(busy: RequeueBusy): JsonValue {
  return {
    reason: busy.reason,
    count: busy.count,
    message: busyMessage(busy),
    rows: busy.rows.map((row) => ({ id: row.id, key: row.key })),
  };
}
