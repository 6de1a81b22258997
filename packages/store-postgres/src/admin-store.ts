import type { AdminStore } from '@queuebox/core';
import { createSqlAdminStore } from '@queuebox/sql-store-common';
import * as adminSql from './admin-sql.ts';
import type { SqlExecutor } from './executor.ts';
import { inlineBytesFor, readOutsideColumns } from './large-columns.ts';
import { getOutboxStatement } from './outbox-sql.ts';
import { POSTGRES_READERS } from './rows.ts';

export { DEFAULT_REQUEUE_BATCH_SIZE } from '@queuebox/sql-store-common';

/** What the admin repository needs. */
export interface PostgresAdminStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
  /**
   * Whether the store offers `vacuum` (a plain VACUUM per table): true on PGlite only, where nothing else vacuums.
   * Default false: a PostgreSQL server's autovacuum does it.
   */
  readonly vacuum?: boolean;
}

/**
 * core's `AdminStore` on PostgreSQL / PGlite: sql-store-common's `createSqlAdminStore` with this dialect's
 * statements, and `vacuum` when `vacuum` is set (PGlite). An outbox requeue tries its keys' insert locks with
 * `adminTryLockKeysStatement` (`pg_try_advisory_xact_lock`), which answers the keys obtained.
 */
export function createPostgresAdminStore({
  executor,
  schema,
  vacuum = false,
}: PostgresAdminStoreOptions): AdminStore {
  const limits = executor.resultLimits;
  const admin = createSqlAdminStore({
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
    // A requeue's and a replay's: they never wait for a key lock.
    async tryLockOutboxKeys(tx, keys) {
      const { text, values } = adminSql.adminTryLockKeysStatement(schema, keys);
      const { rows } = await tx.query<{ key: unknown }>(text, values);
      return new Set(rows.map((row) => String(row.key)));
    },
    completeRows: (table, rows) => readOutsideColumns(executor, schema, table, rows, limits),
  });
  if (!vacuum) return admin;
  return {
    ...admin,
    // PGlite: one table at a time, each its own statement (VACUUM runs outside any transaction).
    async vacuum(tables) {
      for (const table of new Set(tables)) {
        const { text } = adminSql.adminVacuumStatement(schema, table);
        await executor.query(text);
      }
    },
  };
}
