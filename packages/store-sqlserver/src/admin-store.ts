import { type AdminStore, StoreError } from '@queuebox/core';
import { createSqlAdminStore } from '@queuebox/sql-store-common';
import * as adminSql from './admin-sql.ts';
import type { SqlExecutor } from './executor.ts';
import { getOutboxStatement, LOCKS_PER_BATCH, MAX_ROWS_PER_STATEMENT } from './outbox-sql.ts';
import { SQL_SERVER_READERS } from './rows.ts';

export { DEFAULT_REQUEUE_BATCH_SIZE } from '@queuebox/sql-store-common';

/** What the admin repository needs. */
export interface SqlServerAdminStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/**
 * core's `AdminStore` on SQL Server: sql-store-common's `createSqlAdminStore` with this dialect's statements. A
 * requeue or purge of more than {@link MAX_ROWS_PER_STATEMENT} rows runs as several statements of at most that many
 * (each in autocommit; an outbox requeue: several short transactions), so no statement holds the 5,000 row locks at
 * which SQL Server escalates to a table lock; the answer is that of one call of the whole size, with the rows left
 * dead of every part. An outbox requeue tries its keys' insert locks with {@link tryLockKeys}.
 */
export function createSqlServerAdminStore({ executor, schema }: SqlServerAdminStoreOptions): AdminStore {
  return createSqlAdminStore({
    executor,
    schema,
    statements: { ...adminSql, getOutboxStatement },
    readers: SQL_SERVER_READERS,
    // A requeue's and a replay's: they never wait for a key lock.
    tryLockOutboxKeys: (tx, keys) => tryLockKeys(tx, schema, keys),
    maxRowsPerStatement: MAX_ROWS_PER_STATEMENT,
  });
}

/**
 * The keys of `keys` whose insert lock `tx` obtained without waiting ({@link LOCKS_PER_BATCH} per statement of
 * `adminTryLockKeysStatement`); a key another transaction holds is left out. A return code other than granted (0, 1)
 * or busy (-1) is an error, and so is an answer without one code per key.
 */
async function tryLockKeys(
  tx: Pick<SqlExecutor, 'query'>,
  schema: string,
  keys: readonly string[],
): Promise<Set<string>> {
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
