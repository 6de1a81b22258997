import {
  ADMIN_MAX_BATCH_SIZE,
  type AdminStore,
  type RequeueResult,
  type RequeueSelection,
  type RowId,
  StoreError,
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
import { getOutboxStatement, LOCKS_PER_BATCH, MAX_ROWS_PER_STATEMENT } from './outbox-sql.ts';
import { lockOutboxKeys } from './outbox-store.ts';
import { SQL_SERVER_READERS } from './rows.ts';

export { DEFAULT_REQUEUE_BATCH_SIZE } from '@queuebox/sql-store-common';

/** What the admin repository needs. */
export interface SqlServerAdminStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/** A batch size as the shared admin store clamps it: a whole number within [1, ADMIN_MAX_BATCH_SIZE]. */
function batchOf(value: number): number {
  const n = Math.floor(Number(value));
  return Number.isFinite(n) ? Math.min(ADMIN_MAX_BATCH_SIZE, Math.max(1, n)) : 1;
}

/**
 * Runs `step` with chunks of at most {@link MAX_ROWS_PER_STATEMENT} rows until `total` rows are done or a chunk
 * comes back short (or, with `stop`, a chunk says so); answers what the steps did, in order.
 */
async function inChunks<R extends { readonly count: number }>(
  total: number,
  step: (rows: number) => Promise<R>,
  stop: (result: R) => boolean = () => false,
): Promise<R[]> {
  const results: R[] = [];
  for (let left = total; left > 0; ) {
    const rows = Math.min(left, MAX_ROWS_PER_STATEMENT);
    const result = await step(rows);
    results.push(result);
    left -= result.count;
    if (result.count < rows || stop(result)) break;
  }
  return results;
}

/** One dead outbox row a requeue batch chose. */
interface Candidate {
  readonly id: RowId;
  readonly key: string | null;
}

/** What one outbox requeue transaction did: candidates chosen (`count`), ids requeued, candidates of busy keys. */
interface OutboxStep {
  readonly count: number;
  readonly ids: RowId[];
  readonly busy: Candidate[];
}

/**
 * core's `AdminStore` on SQL Server: sql-store-common's `createSqlAdminStore` with this dialect's statements, except
 * the outbox requeue (not its dry run), which is {@link requeueOutboxBatch} here: it takes the keys' insert locks
 * without waiting. A requeue or purge of more than {@link MAX_ROWS_PER_STATEMENT} rows runs as several statements
 * of at most that many (each in autocommit; an outbox requeue: several short transactions), so no statement holds
 * the 5,000 row locks at which SQL Server escalates to a table lock; the answer is that of one call of the whole
 * size, with the rows left dead of every part.
 */
export function createSqlServerAdminStore({ executor, schema }: SqlServerAdminStoreOptions): AdminStore {
  const shared = createSqlAdminStore({
    executor,
    schema,
    statements: { ...adminSql, getOutboxStatement },
    readers: SQL_SERVER_READERS,
    // Replay's: it copies one row of one key and may wait for that key.
    lockOutboxKeys: (tx, keys) => lockOutboxKeys(tx, schema, keys),
  });
  return {
    ...shared,

    async requeue(table, selection, options = {}) {
      const batchSize = batchOf(options.batchSize ?? DEFAULT_REQUEUE_BATCH_SIZE);
      if (options.dryRun === true || (table === 'inbox' && batchSize <= MAX_ROWS_PER_STATEMENT)) {
        return shared.requeue(table, selection, options);
      }
      if (table === 'inbox') {
        const steps = await inChunks(batchSize, (rows) =>
          shared.requeue(table, selection, { ...options, batchSize: rows }),
        );
        const ids = steps.flatMap((step) => step.ids).sort(compareIds);
        return { dryRun: false, count: ids.length, ids, more: ids.length === batchSize };
      }
      const filter = outboxFilter(selection);
      if (filter.ids !== undefined && filter.ids.length === 0) {
        return { dryRun: false, count: 0, ids: [], more: false };
      }
      // A part that requeued nothing ends the call: the next would choose the same rows again.
      const steps = await inChunks(
        batchSize,
        async (rows) => {
          const step = await executor.transaction((tx) => requeueOutboxBatch(tx, schema, filter, rows));
          return { ...step, full: step.count === rows };
        },
        (step) => step.ids.length === 0,
      );
      const ids = steps.flatMap((step) => step.ids).sort(compareIds);
      // A later part chooses the rows an earlier one left dead again, first: each busy row once, and none that a
      // later part requeued after all.
      const requeued = new Set(ids);
      const busy = [...new Map(steps.flatMap((step) => step.busy).map((c) => [c.id, c])).values()].filter(
        (c) => !requeued.has(c.id),
      );
      const result: RequeueResult = {
        dryRun: false,
        count: ids.length,
        ids,
        // More may remain when the last part chose as many rows as it asked for.
        more: steps.at(-1)?.full === true,
        ...busyReport(busy),
      };
      // A caller stops after the last batch and after one that requeued nothing: those report the keys in flight.
      return result.more && result.count > 0 ? result : withKeysInFlight(executor, schema, result, filter);
    },

    async purge(options) {
      const batchSize = batchOf(options.batchSize);
      if (batchSize <= MAX_ROWS_PER_STATEMENT) return shared.purge(options);
      const steps = await inChunks(batchSize, async (rows) => ({
        count: await shared.purge({ ...options, batchSize: rows }),
      }));
      return steps.reduce((sum, step) => sum + step.count, 0);
    },
  };
}

/** The selection as outbox statement filters; an id that cannot name a row cannot be dead, so it is dropped. */
function outboxFilter(selection: RequeueSelection): AdminFilter {
  return {
    ...(selection.ids === undefined ? {} : { ids: selection.ids.filter(isRowId) }),
    ...(selection.topic === undefined ? {} : { topic: selection.topic }),
  };
}

/**
 * The keys of `keys` whose insert lock `tx` obtained without waiting ({@link LOCKS_PER_BATCH} per statement); a
 * key another transaction holds is left out. A return code other than granted (0, 1) or busy (-1) is an error.
 */
async function tryLockKeys(tx: SqlExecutor, schema: string, keys: readonly string[]): Promise<Set<string>> {
  const obtained = new Set<string>();
  for (let i = 0; i < keys.length; i += LOCKS_PER_BATCH) {
    const part = keys.slice(i, i + LOCKS_PER_BATCH);
    const { text, values } = adminSql.adminTryLockKeysStatement(schema, part);
    const { rows } = await tx.query<{ statuses: unknown }>(text, values);
    const statuses = String(rows[0]?.statuses ?? '')
      .split(',')
      .filter((s) => s !== '')
      .map(Number);
    if (statuses.length !== part.length) {
      throw new StoreError(`The key locks answered ${statuses.length} statuses for ${part.length} keys`, {
        context: { schema },
      });
    }
    part.forEach((key, n) => {
      const status = statuses[n] as number;
      if (status >= 0) obtained.add(key);
      else if (status !== -1) {
        throw new StoreError(
          `Could not try the outbox key lock of a dead row (sp_getapplock ${status}); the requeue rolled back, run it again`,
          { context: { schema, appLockStatus: status } },
        );
      }
    });
  }
  return obtained;
}

/**
 * One outbox requeue transaction: the candidates (dead, key idle; at most MAX_ROWS_PER_STATEMENT) U-locked; their
 * keys' insert locks taken without waiting, so no keyed insert of those keys commits meanwhile (its row could be
 * claimed before the requeue commits) and no writer of them waits behind a key this transaction could not have;
 * the head of each key obtained U-locked, waiting for a claim that holds it; then the update of the candidates
 * whose key is free or absent, which checks the keys again with what those claims committed. The candidates of
 * keys another transaction holds stay dead (`busy`).
 */
async function requeueOutboxBatch(
  tx: SqlExecutor,
  schema: string,
  filter: AdminFilter,
  batchSize: number,
): Promise<OutboxStep> {
  const { toRowId } = SQL_SERVER_READERS;
  const chosen = adminSql.adminRequeueCandidatesStatement(schema, filter, batchSize);
  const candidates: Candidate[] = (
    await tx.query<{ id: unknown; key: unknown }>(chosen.text, chosen.values)
  ).rows.map((r) => ({ id: toRowId(r.id), key: typeof r.key === 'string' ? r.key : null }));
  const keys = [...new Set(candidates.flatMap((c) => (c.key === null ? [] : [c.key])))];
  const obtained = keys.length > 0 ? await tryLockKeys(tx, schema, keys) : new Set<string>();
  if (obtained.size > 0) {
    const heads = adminSql.adminLockPendingKeyRowsStatement(schema, [...obtained]);
    await tx.query(heads.text, heads.values);
  }
  const free = candidates.filter((c) => c.key === null || obtained.has(c.key));
  const busy = candidates.filter((c) => c.key !== null && !obtained.has(c.key));
  if (free.length === 0) return { count: candidates.length, ids: [], busy };
  const ids = free.map((c) => c.id);
  const { text, values } = adminSql.adminRequeueStatement(schema, 'outbox', { ids }, ids.length);
  const { rows } = await tx.query<{ id: unknown }>(text, values);
  return { count: candidates.length, ids: rows.map((r) => toRowId(r.id)).sort(compareIds), busy };
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
  const { toRowId } = SQL_SERVER_READERS;
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
