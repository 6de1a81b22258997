/**
 * enqueue on SQL Server: store-sqlserver's outbox insert — which takes the per-key locks (`sp_getapplock`, owned
 * by the transaction) before it inserts keyed rows — run on the application's own mssql `Transaction`, through an
 * executor over that transaction: the same statements as the store's own writes, built in one place.
 */
import type { NewOutboxMessage, RowId } from '@queuebox/core';
import {
  createSqlServerOutboxStore,
  type SqlExecutor,
  type SqlParams,
  translateError,
} from '@queuebox/store-sqlserver';
import type mssql from 'mssql';

/**
 * store-sqlserver's `SqlExecutor` over the application's transaction: each query is one request of it. Requests
 * are issued one after another (mssql refuses overlapping requests on a transaction). `transaction()` joins it;
 * `close()` does nothing, because the application owns the transaction.
 */
export function transactionExecutor(transaction: mssql.Transaction): SqlExecutor {
  const tx: SqlExecutor = {
    async query<R>(text: string, values?: SqlParams) {
      try {
        const request = transaction.request();
        for (const [name, param] of Object.entries(values ?? {}))
          request.input(name, param.type, param.value);
        const result = await request.query<R>(text);
        const rows = result.recordset ? [...result.recordset] : [];
        const changed = result.rowsAffected.reduce((sum, n) => sum + n, 0);
        return { rows, rowCount: Math.max(changed, rows.length) };
      } catch (error) {
        throw translateError(error);
      }
    },
    transaction: (fn) => fn(tx),
    close: async () => {},
  };
  return tx;
}

/**
 * Runs one enqueue through `executor`: the key locks (distinct keys, in one sorted order, each waiting at most
 * `keyLockTimeoutMs`, default 10 s: a `StoreUnavailableError` when another transaction held a key that long, a
 * `StoreError` when SQL Server refuses a lock otherwise), then the insert, in statements of at most 4,000 rows so
 * none escalates to a table lock held until the application commits; answers the ids in message order.
 */
export async function enqueueOnSqlServer(
  executor: SqlExecutor,
  schema: string,
  messages: readonly NewOutboxMessage[],
  options: { readonly keyLockTimeoutMs?: number } = {},
): Promise<RowId[]> {
  return createSqlServerOutboxStore({ executor, schema, ...options }).insert(messages);
}
