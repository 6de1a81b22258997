import type { MessageState, RowClaim, SettleReport } from '@queuebox/core';
import {
  isRowId,
  readClaimedRows,
  settleable as settleableClaims,
  settle as settleRows,
  type UnreadableClaim,
  uniqueClaims,
} from '@queuebox/sql-store-common';
import { isLockTimeout } from './errors.ts';
import type { SqlExecutor, Statement } from './executor.ts';
import { MAX_ROWS_PER_STATEMENT } from './outbox-sql.ts';
import { compareIds, type RawRow, SQL_SERVER_READERS, toRowId } from './rows.ts';

export { DEFAULT_RECLAIM_LIMIT, isRowId, settleReport, uniqueClaims } from '@queuebox/sql-store-common';

/** UNIQUEIDENTIFIER text, in either case. */
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `token` can be a claim token (UNIQUEIDENTIFIER text). */
export function isClaimToken(token: string): boolean {
  return typeof token === 'string' && GUID.test(token);
}

/**
 * Whether a claim may go to the server: its id can name a row and its token is UNIQUEIDENTIFIER text. Unlike
 * PostgreSQL, which compares tokens as text, SQL Server would fail the whole statement converting a malformed
 * token to UNIQUEIDENTIFIER.
 */
export function isSettleable(item: RowClaim): boolean {
  return isRowId(item.id) && isClaimToken(item.claimToken);
}

/** The items once per id (`unique`), and those of them worth sending to the server (`valid`, see isSettleable). */
export function settleable<I extends RowClaim>(items: readonly I[]): { unique: I[]; valid: I[] } {
  return settleableClaims(items, isSettleable);
}

/**
 * Runs one bulk settle and turns its `OUTPUT inserted.id, inserted.state` rows into a `SettleReport` (see
 * sql-store-common's `settle`); an item that is not {@link isSettleable} is stale without a round trip. More than
 * MAX_ROWS_PER_STATEMENT items (after dropping repeated ids) take one statement per 4,000.
 */
export async function settle<I extends RowClaim, S extends MessageState>(
  executor: SqlExecutor,
  items: readonly I[],
  statement: (items: readonly I[]) => Statement,
  stateOf: (literal: unknown) => MessageState,
): Promise<SettleReport<S>> {
  const dialect = { toRowId, isSettleable };
  const unique = uniqueClaims(items);
  if (unique.length <= MAX_ROWS_PER_STATEMENT) {
    return settleRows<I, S, Statement['values']>(executor, unique, statement, stateOf, dialect);
  }
  // At most MAX_ROWS_PER_STATEMENT rows per UPDATE (lock escalation); each item settles on its own anyway.
  const settled: SettleReport<S>['settled'][number][] = [];
  const stale: SettleReport<S>['stale'][number][] = [];
  for (let i = 0; i < unique.length; i += MAX_ROWS_PER_STATEMENT) {
    const chunk = unique.slice(i, i + MAX_ROWS_PER_STATEMENT);
    const report = await settleRows<I, S, Statement['values']>(executor, chunk, statement, stateOf, dialect);
    settled.push(...report.settled);
    stale.push(...report.stale);
  }
  return { settled, stale };
}

/**
 * Runs a claim statement and answers its rows by id (OUTPUT promises no order; PostgreSQL's claim answers by id).
 * Error 1222 — a lock wait past the batch's LOCK_TIMEOUT, which ended the statement and its autocommit
 * transaction without claiming anything — answers `[]`: nothing is claimable now. A row `toRow` cannot map goes
 * dead alone through `deadLetter` (best effort: if that fails too, its lease expires and it comes back as after a
 * crash); the other rows are answered.
 */
export async function claimRows<T extends { readonly id: string }>(
  executor: Pick<SqlExecutor, 'query'>,
  claim: Statement,
  toRow: (row: RawRow) => T,
  deadLetter: (items: readonly UnreadableClaim[]) => Statement,
): Promise<T[]> {
  let answered: RawRow[];
  try {
    answered = (await executor.query<RawRow>(claim.text, claim.values)).rows;
  } catch (error) {
    if (isLockTimeout(error)) return [];
    throw error;
  }
  const { rows, unreadable } = readClaimedRows(answered, toRow, SQL_SERVER_READERS);
  if (unreadable.length > 0) {
    const dead = deadLetter(unreadable);
    await executor.query(dead.text, dead.values).catch(() => undefined);
  }
  return rows.sort((a, b) => compareIds(a.id, b.id));
}
