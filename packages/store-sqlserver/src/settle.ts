import type { MessageState, RowClaim, RowId, SettleReport } from '@queuebox/core';
import type { SqlExecutor, Statement } from './executor.ts';
import { toRowId } from './rows.ts';

/** Default most rows one reclaim step returns (outbox and inbox). */
export const DEFAULT_RECLAIM_LIMIT = 1000;

/** A bigint identity as text; anything else cannot name a row and is reported stale without a query. */
const ROW_ID = /^[1-9][0-9]{0,18}$/;
const MAX_BIGINT = 9223372036854775807n;

/** UNIQUEIDENTIFIER text, in either case. */
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Runs one bulk settle and turns its `OUTPUT inserted.id, inserted.state` rows into a `SettleReport`. Items are
 * deduplicated by id (the first wins), and both lists keep the order of `items`. An item whose id or token no
 * row could have is stale without a round trip — unlike PostgreSQL, which compares tokens as text, SQL Server
 * would fail the whole statement converting a malformed token to UNIQUEIDENTIFIER.
 */
export async function settle<I extends RowClaim, S extends MessageState>(
  executor: SqlExecutor,
  items: readonly I[],
  statement: (items: readonly I[]) => Statement,
  stateOf: (literal: unknown) => MessageState,
): Promise<SettleReport<S>> {
  const { unique, valid } = settleable(items);
  const states = new Map<RowId, MessageState>();
  if (valid.length > 0) {
    const { text, values } = statement(valid);
    const { rows } = await executor.query<{ id: unknown; state: unknown }>(text, values);
    for (const row of rows) states.set(toRowId(row.id), stateOf(row.state));
  }
  return settleReport<S>(unique, states);
}

/** The items once per id (`unique`), and those of them worth sending to the server (`valid`). */
export function settleable<I extends RowClaim>(items: readonly I[]): { unique: I[]; valid: I[] } {
  const unique = uniqueClaims(items);
  return { unique, valid: unique.filter((i) => isRowId(i.id) && isClaimToken(i.claimToken)) };
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

/** Whether `token` can be a claim token (UNIQUEIDENTIFIER text). */
export function isClaimToken(token: string): boolean {
  return typeof token === 'string' && GUID.test(token);
}
