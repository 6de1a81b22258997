import { ADMIN_MAX_BATCH_SIZE, type AdminStore } from '@queuebox/core';
import { compareIds, createSqlAdminStore, DEFAULT_REQUEUE_BATCH_SIZE } from '@queuebox/sql-store-common';
import * as adminSql from './admin-sql.ts';
import type { SqlExecutor } from './executor.ts';
import { getOutboxStatement, MAX_ROWS_PER_STATEMENT } from './outbox-sql.ts';
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
 * comes back short; answers what the steps did, in order.
 */
async function inChunks<R extends { readonly count: number }>(
  total: number,
  step: (rows: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  for (let left = total; left > 0; ) {
    const rows = Math.min(left, MAX_ROWS_PER_STATEMENT);
    const result = await step(rows);
    results.push(result);
    left -= result.count;
    if (result.count < rows) break;
  }
  return results;
}

/**
 * core's `AdminStore` on SQL Server: sql-store-common's `createSqlAdminStore` with this dialect's statements. A requeue
 * or purge of more than {@link MAX_ROWS_PER_STATEMENT} rows runs as several statements of at most that many (each
 * in autocommit), so no statement holds the 5,000 row locks at which SQL Server escalates to a table lock; the
 * answer is that of one call of the whole size.
 */
export function createSqlServerAdminStore({ executor, schema }: SqlServerAdminStoreOptions): AdminStore {
  const shared = createSqlAdminStore({
    executor,
    schema,
    statements: { ...adminSql, getOutboxStatement },
    readers: SQL_SERVER_READERS,
    lockOutboxKeys: (tx, keys) => lockOutboxKeys(tx, schema, keys),
  });
  return {
    ...shared,

    async requeue(table, selection, options = {}) {
      const batchSize = batchOf(options.batchSize ?? DEFAULT_REQUEUE_BATCH_SIZE);
      if (options.dryRun === true || batchSize <= MAX_ROWS_PER_STATEMENT) {
        return shared.requeue(table, selection, options);
      }
      const steps = await inChunks(batchSize, (rows) =>
        shared.requeue(table, selection, { ...options, batchSize: rows }),
      );
      const ids = steps.flatMap((step) => step.ids).sort(compareIds);
      return { dryRun: false, count: ids.length, ids, more: ids.length === batchSize };
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
