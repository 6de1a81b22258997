import type { AdminStore } from '@queuebox/core';
import { createSqlAdminStore } from '@queuebox/store-sql';
import * as adminSql from './admin-sql.ts';
import type { SqlExecutor } from './executor.ts';
import { getOutboxStatement } from './outbox-sql.ts';
import { lockOutboxKeys } from './outbox-store.ts';
import { POSTGRES_READERS } from './rows.ts';

export { DEFAULT_REQUEUE_BATCH_SIZE } from '@queuebox/store-sql';

/** What the admin repository needs. */
export interface PostgresAdminStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/** core's `AdminStore` on PostgreSQL / PGlite: store-sql's `createSqlAdminStore` with this dialect's statements. */
export function createPostgresAdminStore({ executor, schema }: PostgresAdminStoreOptions): AdminStore {
  return createSqlAdminStore({
    executor,
    schema,
    statements: { ...adminSql, getOutboxStatement },
    readers: POSTGRES_READERS,
    lockOutboxKeys: (tx, keys) => lockOutboxKeys(tx, schema, keys),
  });
}
