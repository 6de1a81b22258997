import type { MessageState, RowClaim, RowId, SettleReport } from '@queuebox/core';
import type { SqlExecutor, Statement } from './executor.ts';

/** Default most rows one reclaim step returns (outbox and inbox). */
export const DEFAULT_RECLAIM_LIMIT = 1000;

/** A bigint identity as text; anything else cannot name a row and is reported stale without a query. */
const ROW_ID = /^[1-9][0-9]{0,18}$/;
const MAX_BIGINT = 9223372036854775807n;

/**
 * Runs one bulk settle and turns its `RETURNING id, state` rows into a `SettleReport`. Items are deduplicated by
 * id (the first wins), malformed ids are stale without a round trip, and both lists keep the order of `items`.
 */
export async function settle<I extends RowClaim, S extends MessageState>(
  executor: SqlExecutor,
  items: readonly I[],
  statement: (items: readonly I[]) => Statement,
  stateOf: (literal: unknown) => MessageState,
): Promise<SettleReport<S>> {
  const unique = uniqueClaims(items);
  const valid = unique.filter((i) => isRowId(i.id));
  const states = new Map<RowId, MessageState>();
  if (valid.length > 0) {
    const { text, values } = statement(valid);
    const { rows } = await executor.query<{ id: string; state: string }>(text, values);
    for (const row of rows) states.set(String(row.id), stateOf(row.state));
  }
  const settled: { id: RowId; state: S }[] = [];
  const stale: RowId[] = [];
  for (const item of unique) {
    const state = states.get(item.id);
    if (state === undefined) stale.push(item.id);
    else settled.push({ id: item.id, state: state as S });
  }
  return { settled, stale };
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

/** Whether `id` can name a row (a positive bigint in decimal). */
export function isRowId(id: string): boolean {
  return typeof id === 'string' && ROW_ID.test(id) && BigInt(id) <= MAX_BIGINT;
}
