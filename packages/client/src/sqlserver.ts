/**
 * enqueue on SQL Server: the key locks (this package's statements) and store-sqlserver's outbox insert, run on
 * the application's own mssql `Transaction`.
 *
 * store-sqlserver does not export its statement builders (`insertOutboxStatement`) yet, so the insert goes
 * through its repository, `createSqlServerOutboxStore({ executor }).insert`, over an executor that runs on the
 * application's transaction: the same statement, built in one place.
 */
import { type NewOutboxMessage, type RowId, StoreError } from '@queuebox/core';
import {
  createSqlServerOutboxStore,
  quoteSchema,
  type SqlExecutor,
  type SqlParams,
  type Statement,
  translateError,
} from '@queuebox/store-sqlserver';
import mssql from 'mssql';
import { outboxKeyLockResource } from './lock-names.ts';
import { distinctKeys } from './message.ts';

/** Most key locks in one batch (SQL Server takes at most 2,100 parameters per request). */
export const LOCKS_PER_BATCH = 500;

/**
 * Takes `sp_getapplock` (Exclusive, owned by the transaction) on each resource in the order given and answers
 * `status`: 0 or 1 when every lock was granted, else the first failure (-1 timeout, -2 cancelled, -3 deadlock
 * victim, -999 error, e.g. no open transaction), after which no further lock is requested. The wait is bounded by
 * the session's LOCK_TIMEOUT (default: none) and the driver's request timeout.
 */
export function lockOutboxKeysStatement(resources: readonly string[]): Statement {
  const values: Record<string, { type: mssql.ISqlType; value: string }> = {};
  const lines = resources.map((resource, i) => {
    values[`resource${i}`] = { type: mssql.NVarChar(255), value: resource };
    return `IF @status >= 0 EXEC @status = sys.sp_getapplock @Resource = @resource${i}, @LockMode = N'Exclusive', @LockOwner = N'Transaction';`;
  });
  return {
    text: `DECLARE @status INT = 0;\n${lines.join('\n')}\nSELECT @status AS status;`,
    values: values as SqlParams,
  };
}

/**
 * The key-lock batches of `messages` (none when no message has a key): resources sorted, so every writer takes
 * them in one order and two writers never wait on each other in a cycle; at most {@link LOCKS_PER_BATCH} each.
 */
export function lockStatements(schema: string, messages: readonly NewOutboxMessage[]): Statement[] {
  quoteSchema(schema);
  const resources = distinctKeys(messages)
    .map((key) => outboxKeyLockResource(schema, key))
    .sort();
  const batches: Statement[] = [];
  for (let i = 0; i < resources.length; i += LOCKS_PER_BATCH) {
    batches.push(lockOutboxKeysStatement(resources.slice(i, i + LOCKS_PER_BATCH)));
  }
  return batches;
}

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

/** Runs the key locks and the insert of one enqueue through `executor`; answers the ids in message order. */
export async function enqueueOnSqlServer(
  executor: SqlExecutor,
  schema: string,
  messages: readonly NewOutboxMessage[],
): Promise<RowId[]> {
  for (const { text, values } of lockStatements(schema, messages)) {
    const { rows } = await executor.query<{ status: unknown }>(text, values);
    const status = rows[0]?.status;
    if (typeof status !== 'number' || status < 0) {
      // -1 timeout, -2 cancelled, -3 deadlock victim, -999 no open transaction or a bad call.
      throw new StoreError(
        `Could not lock the outbox key of this message (sp_getapplock ${String(status)}); roll the transaction back and retry it`,
        { context: { schema, status } },
      );
    }
  }
  return createSqlServerOutboxStore({ executor, schema }).insert(messages);
}
