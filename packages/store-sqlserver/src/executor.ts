import mssql from 'mssql';
import { isDeadlock, translateError } from './errors.ts';

/** A parameter type as mssql declares it: a type factory (`mssql.Int`) or a sized type (`mssql.NVarChar(400)`). */
export type SqlType = mssql.ISqlType | (() => mssql.ISqlType);

/** One named parameter: its declared SQL Server type and its value. */
export interface SqlParam {
  readonly type: SqlType;
  readonly value: unknown;
}

/** Parameters by name, without the `@` that the statement text writes. */
export type SqlParams = Readonly<Record<string, SqlParam>>;

/** One SQL statement (one batch): the text with `@name` parameters, and their types and values. */
export interface Statement {
  readonly text: string;
  readonly values: SqlParams;
}

/** Per-query options. */
export interface QueryOptions {
  /**
   * How long the server may take, in milliseconds; 0 waits without limit. Default: the pool's `requestTimeout`.
   * The migrator uses it: a migration or a wait for another migrator's lock may outlast a normal request.
   */
  readonly timeoutMs?: number;
}

/** What a query answers: the rows of its first result set and how many rows it changed or returned. */
export interface QueryResult<R> {
  readonly rows: R[];
  readonly rowCount: number;
}

/**
 * The one door to the database that the repositories and the migrator use, over an mssql pool.
 *
 * `query` runs one batch with `@name` parameters (several statements are allowed; the rows are those of the
 * first result set). `transaction` runs `fn` in one READ COMMITTED transaction that commits when `fn` resolves
 * and rolls back when it throws; inside it use only the `tx` it hands you. A `transaction` on a `tx` joins the
 * enclosing transaction. A deadlock victim (error 1205) — an autocommit `query`, or a whole `transaction`, which
 * SQL Server rolled back entirely — is run again, up to `deadlockRetries` times, so `fn` must have no effect
 * outside the database. Errors are core's `StoreUnavailableError` or `StoreError` (see errors.ts).
 */
export interface SqlExecutor {
  query<R = Record<string, unknown>>(
    text: string,
    values?: SqlParams,
    options?: QueryOptions,
  ): Promise<QueryResult<R>>;
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Closes the pool (once). On a `tx`, does nothing. */
  close(): Promise<void>;
}

/** Options of {@link createSqlServerExecutor}. */
export interface SqlServerExecutorOptions {
  /** Times a deadlock victim is run again before its error is raised. Default 3. */
  readonly deadlockRetries?: number;
}

/** Default of {@link SqlServerExecutorOptions.deadlockRetries}. */
export const DEFAULT_DEADLOCK_RETRIES = 3;

/**
 * Runs `run`, and again while it fails as a deadlock victim, at most `retries` more times. Only for work that
 * SQL Server rolled back entirely when it chose the victim: a whole transaction, or one autocommit batch.
 */
export async function retryDeadlocks<T>(run: () => Promise<T>, retries: number): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= retries || !isDeadlock(error)) throw error;
    }
  }
}

/** Binds `values` to a fresh request and runs `text`. Driver errors come out raw. */
async function request<R>(
  target: mssql.ConnectionPool | mssql.Transaction,
  text: string,
  values: SqlParams | undefined,
  options: QueryOptions | undefined,
): Promise<QueryResult<R>> {
  // mssql 12 takes per-request overrides as a second constructor argument; @types/mssql does not declare it.
  const RequestWithOverrides = mssql.Request as unknown as new (
    parent: mssql.ConnectionPool | mssql.Transaction,
    overrides: { requestTimeout?: number },
  ) => mssql.Request;
  const req =
    options?.timeoutMs === undefined
      ? new mssql.Request(target as mssql.ConnectionPool)
      : new RequestWithOverrides(target, { requestTimeout: options.timeoutMs });
  for (const [name, param] of Object.entries(values ?? {})) req.input(name, param.type, param.value);
  const result = await req.query<R>(text);
  const rows = result.recordset ? [...result.recordset] : [];
  const changed = result.rowsAffected.reduce((sum, n) => sum + n, 0);
  return { rows, rowCount: Math.max(changed, rows.length) };
}

/** A `tx` over one mssql transaction; requests are queued because mssql refuses overlapping ones on it. */
function transactionExecutor(transaction: mssql.Transaction): SqlExecutor {
  let queue: Promise<unknown> = Promise.resolve();
  const tx: SqlExecutor = {
    query<R>(text: string, values?: SqlParams, options?: QueryOptions): Promise<QueryResult<R>> {
      const next = queue
        .then(() => request<R>(transaction, text, values, options))
        .catch((error: unknown) => {
          throw translateError(error);
        });
      queue = next.catch(() => undefined);
      return next;
    },
    transaction: (fn) => fn(tx),
    close: async () => {},
  };
  return tx;
}

/**
 * A `SqlExecutor` over an mssql `ConnectionPool`. The pool connects on first use, and again after a failed
 * connect, so a store can be created while the database is still down; the executor owns the pool and `close()`
 * closes it (once). It listens to the pool's `error` event, because an idle connection that fails would
 * otherwise crash the process; the next query reports the outage instead. No session state is set.
 */
export function createSqlServerExecutor(
  pool: mssql.ConnectionPool,
  options: SqlServerExecutorOptions = {},
): SqlExecutor {
  const retries = options.deadlockRetries ?? DEFAULT_DEADLOCK_RETRIES;
  pool.on('error', () => {});

  let connecting: Promise<unknown> | undefined;
  let closing: Promise<void> | undefined;
  const connected = async (): Promise<void> => {
    if (pool.connected) return;
    connecting ??= pool.connect().catch((error: unknown) => {
      connecting = undefined;
      throw error;
    });
    await connecting;
  };

  return {
    async query<R>(text: string, values?: SqlParams, options?: QueryOptions): Promise<QueryResult<R>> {
      try {
        await connected();
        return await retryDeadlocks(() => request<R>(pool, text, values, options), retries);
      } catch (error) {
        throw translateError(error);
      }
    },

    async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
      try {
        await connected();
        return await retryDeadlocks(async () => {
          const transaction = new mssql.Transaction(pool);
          await transaction.begin(mssql.ISOLATION_LEVEL.READ_COMMITTED);
          try {
            const result = await fn(transactionExecutor(transaction));
            await transaction.commit();
            return result;
          } catch (error) {
            // After a deadlock or an XACT_ABORT error SQL Server has rolled back already and rollback() rejects.
            await transaction.rollback().catch(() => undefined);
            throw error;
          }
        }, retries);
      } catch (error) {
        throw translateError(error);
      }
    },

    close() {
      closing ??= pool.close().then(
        () => undefined,
        (error: unknown) => Promise.reject(translateError(error)),
      );
      return closing;
    },
  };
}
