import {
  ADMIN_MAX_BATCH_SIZE,
  type AdminStore,
  type RequeueResult,
  type RequeueSelection,
  type RowId,
} from '@queuebox/core';
import {
  type AdminFilter,
  compareIds,
  createSqlAdminStore,
  DEFAULT_REQUEUE_BATCH_SIZE,
  isRowId,
  KEYS_IN_FLIGHT_REPORTED,
} from '@queuebox/sql-store-common';
import * as adminSql from './admin-sql.ts';
import type { SqlExecutor } from './executor.ts';
import { inlineBytesFor, readOutsideColumns } from './large-columns.ts';
import { getOutboxStatement } from './outbox-sql.ts';
import { lockOutboxKeys } from './outbox-store.ts';
import { POSTGRES_READERS } from './rows.ts';

export { DEFAULT_REQUEUE_BATCH_SIZE } from '@queuebox/sql-store-common';

/** What the admin repository needs. */
export interface PostgresAdminStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/** One dead outbox row a requeue batch chose. */
interface Candidate {
  readonly id: RowId;
  readonly key: string | null;
}

/**
 * core's `AdminStore` on PostgreSQL / PGlite: sql-store-common's `createSqlAdminStore` with this dialect's
 * statements, except the outbox requeue (not its dry run), which is {@link requeueOutboxBatch} here: it takes the
 * keys' insert locks without waiting.
 */
export function createPostgresAdminStore({ executor, schema }: PostgresAdminStoreOptions): AdminStore {
  const limits = executor.resultLimits;
  const shared = createSqlAdminStore({
    executor,
    schema,
    statements: {
      ...adminSql,
      // With result limits (the Data API) a page's large columns are read outside (large-columns.ts).
      adminListStatement: (s, table, filter, afterId, limit) =>
        adminSql.adminListStatement(s, table, filter, afterId, limit, inlineBytesFor(limits, limit)),
      getOutboxStatement: (s, id) => getOutboxStatement(s, id, inlineBytesFor(limits, 1)),
    },
    readers: POSTGRES_READERS,
    // Replay's: it copies one row of one key and may wait for that key.
    lockOutboxKeys: (tx, keys) => lockOutboxKeys(tx, schema, keys),
    completeRows: (table, rows) => readOutsideColumns(executor, schema, table, rows, limits),
  });
  return {
    ...shared,
    async requeue(table, selection, options = {}) {
      if (table !== 'outbox' || options.dryRun === true) return shared.requeue(table, selection, options);
      const batchSize = batchOf(options.batchSize ?? DEFAULT_REQUEUE_BATCH_SIZE);
      const filter = outboxFilter(selection);
      if (filter.ids !== undefined && filter.ids.length === 0) {
        return { dryRun: false, count: 0, ids: [], more: false };
      }
      const batch = await executor.transaction((tx) => requeueOutboxBatch(tx, schema, filter, batchSize));
      const result: RequeueResult = {
        dryRun: false,
        count: batch.ids.length,
        ids: batch.ids,
        more: batch.taken === batchSize,
        ...busyReport(batch.busy),
      };
      // A caller stops after the last batch and after one that requeued nothing: those report the keys in flight.
      return result.more && result.count > 0 ? result : withKeysInFlight(executor, schema, result, filter);
    },
  };
}

/** A batch size as the shared admin store clamps it: a whole number within [1, ADMIN_MAX_BATCH_SIZE]. */
function batchOf(value: number): number {
  const n = Math.floor(Number(value));
  return Number.isFinite(n) ? Math.min(ADMIN_MAX_BATCH_SIZE, Math.max(1, n)) : 1;
}

/** The selection as outbox statement filters; an id that cannot name a row cannot be dead, so it is dropped. */
function outboxFilter(selection: RequeueSelection): AdminFilter {
  return {
    ...(selection.ids === undefined ? {} : { ids: selection.ids.filter(isRowId) }),
    ...(selection.topic === undefined ? {} : { topic: selection.topic }),
  };
}

/**
 * One outbox requeue batch in `tx`: the candidates (dead, key idle) locked; their keys' insert locks taken without
 * waiting, so no keyed insert of those keys commits meanwhile (its row could be claimed before the requeue commits)
 * and no writer of them waits behind a key this batch could not have; the head of each key obtained locked,
 * waiting for a claim that holds it; then the update of the candidates whose key is free or absent, which checks
 * the keys again with what those claims committed. The candidates of keys another transaction holds stay dead
 * (`busy`). Answers how many candidates there were, the ids requeued and the busy ones.
 */
async function requeueOutboxBatch(
  tx: SqlExecutor,
  schema: string,
  filter: AdminFilter,
  batchSize: number,
): Promise<{ taken: number; ids: RowId[]; busy: Candidate[] }> {
  const { toRowId } = POSTGRES_READERS;
  const chosen = adminSql.adminRequeueCandidatesStatement(schema, filter, batchSize);
  const candidates: Candidate[] = (
    await tx.query<{ id: unknown; key: unknown }>(chosen.text, chosen.values)
  ).rows.map((r) => ({ id: toRowId(r.id), key: typeof r.key === 'string' ? r.key : null }));
  const keys = [...new Set(candidates.flatMap((c) => (c.key === null ? [] : [c.key])))];
  const obtained = new Set<string>();
  if (keys.length > 0) {
    const tryLock = adminSql.adminTryLockKeysStatement(schema, keys);
    for (const row of (await tx.query<{ key: unknown }>(tryLock.text, tryLock.values)).rows) {
      obtained.add(String(row.key));
    }
    if (obtained.size > 0) {
      const heads = adminSql.adminLockPendingKeyRowsStatement(schema, [...obtained]);
      await tx.query(heads.text, heads.values);
    }
  }
  const free = candidates.filter((c) => c.key === null || obtained.has(c.key));
  const busy = candidates.filter((c) => c.key !== null && !obtained.has(c.key));
  if (free.length === 0) return { taken: candidates.length, ids: [], busy };
  const ids = free.map((c) => c.id);
  const { text, values } = adminSql.adminRequeueStatement(schema, 'outbox', { ids }, ids.length);
  const { rows } = await tx.query<{ id: unknown }>(text, values);
  return { taken: candidates.length, ids: rows.map((r) => toRowId(r.id)).sort(compareIds), busy };
}

/** The `keyBusy` part of a requeue's answer, when rows were left dead for it. */
function busyReport(busy: readonly Candidate[]): Pick<RequeueResult, 'keyBusy'> {
  if (busy.length === 0) return {};
  const rows = [...busy]
    .sort((a, b) => compareIds(a.id, b.id))
    .slice(0, KEYS_IN_FLIGHT_REPORTED)
    .map((c) => ({ id: c.id, key: c.key ?? '' }));
  return { keyBusy: { reason: 'key_busy', count: busy.length, rows } };
}

/** `result` with the dead rows of `filter` whose key has a row processing (`skipped`), when there are any. */
async function withKeysInFlight(
  executor: SqlExecutor,
  schema: string,
  result: RequeueResult,
  filter: AdminFilter,
): Promise<RequeueResult> {
  const { toRowId } = POSTGRES_READERS;
  const { text, values } = adminSql.adminKeysInFlightStatement(schema, filter, KEYS_IN_FLIGHT_REPORTED);
  const { rows } = await executor.query<{
    id: unknown;
    key: unknown;
    processing_id: unknown;
    total: unknown;
  }>(text, values);
  if (rows.length === 0) return result;
  return {
    ...result,
    skipped: {
      reason: 'key_in_flight',
      count: Number(rows[0]?.total ?? rows.length),
      rows: rows.map((r) => ({
        id: toRowId(r.id),
        key: String(r.key),
        processingId: toRowId(r.processing_id),
      })),
    },
  };
}
