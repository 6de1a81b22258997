import {
  describeValue,
  type MessageState,
  type RowClaim,
  type RowId,
  type SettleReport,
} from '@queuebox/core';
import type { SqlExecutor, Statement } from './dialect.ts';

/** Default most rows one reclaim step returns (outbox and inbox). */
export const DEFAULT_RECLAIM_LIMIT = 1000;

/** A bigint identity as text; anything else cannot name a row and is reported stale without a query. */
const ROW_ID = /^[1-9][0-9]{0,18}$/;
const MAX_BIGINT = 9223372036854775807n;

/** Whether `id` can name a row (a positive bigint in decimal). */
export function isRowId(id: string): boolean {
  return typeof id === 'string' && ROW_ID.test(id) && BigInt(id) <= MAX_BIGINT;
}

/** Whether a claim is worth sending to the server; the default only asks that its id can name a row. */
export type IsSettleable = (item: RowClaim) => boolean;

/** The default {@link IsSettleable}: the id can name a row (see {@link isRowId}). */
export function hasRowId(item: RowClaim): boolean {
  return isRowId(item.id);
}

/** The items with the first occurrence of each id. */
export function uniqueClaims<I extends RowClaim>(items: readonly I[]): I[] {
  const seen = new Set<RowId>();
  return items.filter((i) => {
    if (seen.has(i.id)) return false;
    seen.add(i.id);
    return true;
  });
}

/**
 * The items once per id (`unique`, the first wins), and those of them worth sending to the server (`valid`,
 * judged by `isSettleable`; default {@link hasRowId}). Throws a `TypeError` naming the value when an item's id is
 * not a string at all (a number, say): that is the caller's mistake, not a claim that was lost, so it is not
 * reported stale (which a pull worker turns into `ClaimLostError`). A string that names no row is stale.
 */
export function settleable<I extends RowClaim>(
  items: readonly I[],
  isSettleable: IsSettleable = hasRowId,
): { unique: I[]; valid: I[] } {
  for (const item of items) {
    const id: unknown = item?.id;
    if (typeof id !== 'string')
      throw new TypeError(
        `a settled row's id must be the row id as a decimal string, as the claim answered it, such as "42" (got ${describeValue(id)})`,
      );
  }
  const unique = uniqueClaims(items);
  return { unique, valid: unique.filter(isSettleable) };
}

/** The report of a settle: items whose row changed (with its new state) are settled, the others stale. */
export function settleReport<S extends MessageState>(
  unique: readonly RowClaim[],
  states: ReadonlyMap<RowId, MessageState>,
): SettleReport<S> {
  const settled: { id: RowId; state: S }[] = [];
  const stale: RowId[] = [];
  for (const item of unique) {
    const state = states.get(item.id);
    if (state === undefined) stale.push(item.id);
    else settled.push({ id: item.id, state: state as S });
  }
  return { settled, stale };
}

/** What differs between dialects in a settle. */
export interface SettleDialect {
  /** Reads the `id` column the statement answers (see `ColumnReaders.toRowId`). */
  readonly toRowId: (value: unknown) => RowId;
  /** Which items go to the server; the others are stale without a round trip. Default {@link hasRowId}. */
  readonly isSettleable?: IsSettleable;
}

/**
 * Runs one bulk settle and turns the `id, state` rows it answers into a `SettleReport`. Items are deduplicated by
 * id (the first wins), items that are not settleable are stale without a round trip, and both lists keep the
 * order of `items`.
 */
export async function settle<I extends RowClaim, S extends MessageState, V>(
  executor: SqlExecutor<V>,
  items: readonly I[],
  statement: (items: readonly I[]) => Statement<V>,
  stateOf: (literal: unknown) => MessageState,
  dialect: SettleDialect,
): Promise<SettleReport<S>> {
  const { unique, valid } = settleable(items, dialect.isSettleable);
  const states = new Map<RowId, MessageState>();
  if (valid.length > 0) {
    const { text, values } = statement(valid);
    const { rows } = await executor.query<{ id: unknown; state: unknown }>(text, values);
    for (const row of rows) states.set(dialect.toRowId(row.id), stateOf(row.state));
  }
  return settleReport<S>(unique, states);
}
