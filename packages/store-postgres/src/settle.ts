import type { MessageState, RowClaim, SettleReport } from '@queuebox/core';
import { settle as settleRows } from '@queuebox/sql-store-common';
import type { SqlExecutor, Statement } from './executor.ts';
import { toRowId } from './rows.ts';

export { DEFAULT_RECLAIM_LIMIT, isRowId, uniqueClaims } from '@queuebox/sql-store-common';

/**
 * Runs one bulk settle and turns its `RETURNING id, state` rows into a `SettleReport` (see sql-store-common's `settle`).
 * PostgreSQL compares claim tokens as text, so any token may go to the server; only malformed ids are stale
 * without a round trip.
 */
export function settle<I extends RowClaim, S extends MessageState>(
  executor: SqlExecutor,
  items: readonly I[],
  statement: (items: readonly I[]) => Statement,
  stateOf: (literal: unknown) => MessageState,
): Promise<SettleReport<S>> {
  return settleRows<I, S, readonly unknown[]>(executor, items, statement, stateOf, { toRowId });
}
