import type {
  ArrayValue,
  ColumnMetadata,
  ExecuteStatementCommandOutput,
  Field,
  RDSDataClient,
} from '@aws-sdk/client-rds-data';
import { parseJsonText, QueueBoxError, StoreError, StoreUnavailableError } from '@queuebox/core';
import { splitStatements, toDataApiStatement } from './data-api-sql.ts';
import { translateError } from './errors.ts';
import type { QueryResult, SqlExecutor } from './executor.ts';

/** Where the Data API executor sends its calls. */
export interface DataApiTarget {
  /** ARN of the Aurora cluster (Data API enabled). */
  readonly resourceArn: string;
  /** ARN of the Secrets Manager secret with the database user's name and password. */
  readonly secretArn: string;
  /** Database name. Default: the cluster's default database. */
  readonly database?: string;
}

/** Options of `createDataApiExecutor`. */
export interface DataApiExecutorOptions extends DataApiTarget {
  /** The SDK client (built with `maxAttempts: 1`: statements are not idempotent, see `openDataApiStore`). */
  readonly client: RDSDataClient;
  /**
   * Longest time one call keeps retrying while a paused cluster resumes (`DatabaseResumingException`). Aurora
   * Serverless v2 resumes in up to ≈ 15 s. Default 25000; then the call fails as `StoreUnavailableError`.
   */
  readonly resumeTimeoutMs?: number;
  /** Waits between retries of a resuming cluster: doubles from this, at most 4000 ms. Default 500. */
  readonly resumeBackoffMs?: number;
  /** Told before each wait for a resuming cluster (for logs). Default: nothing. */
  readonly onResuming?: (attempt: number, waitMs: number) => void;
  /** Injected clock and sleep, for tests. */
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/**
 * The Data API's limits (AWS, "Limitations for the Amazon RDS Data API"): 64 KB per row of the result set,
 * 1 MiB per response, and 4 MiB per request (the call's JSON as sent, an array parameter's JSON text escaped again).
 */
export const DATA_API_LIMITS = {
  maxRowBytes: 64 * 1024,
  maxResultBytes: 1024 * 1024,
  maxRequestBytes: 4 * 1024 * 1024,
} as const;

/** Data API errors that mean "not now": the database or the service cannot serve the call at the moment. */
const UNAVAILABLE_ERRORS = new Set([
  'DatabaseUnavailableException',
  'ServiceUnavailableError',
  'InternalServerErrorException',
  'StatementTimeoutException',
  'TransactionNotFoundException',
  'InvalidResourceStateException',
  'ThrottlingException',
  'TooManyRequestsException',
  'RequestTimeout',
  'TimeoutError',
]);

/** `…; SQLState: 23505` at the end of a DatabaseErrorException message. */
const SQL_STATE = /SQLState:\s*([0-9A-Z]{5})/;

/**
 * Translates a Data API (or SDK transport) error into core's errors. `DatabaseErrorException` carries the
 * PostgreSQL error and its SQLSTATE in the message and is classed like a `pg` error (08xxx, 57P0x, 53300 →
 * unavailable; anything else → `StoreError`). The service's own "not now" errors, socket errors and timeouts →
 * `StoreUnavailableError`. Everything else (access denied, bad secret, bad request, a result over the Data API's
 * size limits) → `StoreError`: retrying it unchanged cannot help.
 */
export function translateDataApiError(error: unknown): QueueBoxError {
  if (error instanceof QueueBoxError) return error;
  const name = (error as { name?: unknown } | null)?.name;
  const message = error instanceof Error ? error.message : String(error);
  if (name === 'DatabaseErrorException') {
    const sqlState = SQL_STATE.exec(message)?.[1];
    return translateError(Object.assign(new Error(message), sqlState ? { code: sqlState } : {}));
  }
  const status = (error as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
  const transport = (error as { code?: unknown } | null)?.code;
  if (
    (typeof name === 'string' && UNAVAILABLE_ERRORS.has(name)) ||
    (status !== undefined && status >= 500) ||
    typeof transport === 'string'
  ) {
    return translateError(
      Object.assign(new Error(message), { code: typeof transport === 'string' ? transport : 'ECONNRESET' }),
    );
  }
  return new StoreError(`The Data API refused the call (${String(name ?? 'error')}): ${message}`, {
    cause: error,
  });
}

function isResuming(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === 'DatabaseResumingException';
}

/** A JSON or timestamp column in the Data API's text form, read like `pg` reads it. */
function fromText(text: string, type: string | undefined): unknown {
  switch (type) {
    case 'json':
    case 'jsonb':
      return parseJsonText(text);
    case 'timestamptz':
    case 'timestamp': {
      // The Data API answers `2026-12-01 15:46:55.123456` in UTC; an explicit offset is kept when present.
      const iso = text.replace(' ', 'T');
      const date = new Date(/[zZ]|[+-]\d\d(:?\d\d)?$/.test(iso) ? iso : `${iso}Z`);
      // `infinity` and the like stay text: the row mapper refuses that one row, not the whole answer.
      return Number.isNaN(date.getTime()) ? text : date;
    }
    default:
      return text;
  }
}

function fromArray(array: ArrayValue): unknown[] {
  if (array.stringValues) return array.stringValues;
  if (array.longValues) return array.longValues;
  if (array.doubleValues) return array.doubleValues;
  if (array.booleanValues) return array.booleanValues;
  if (array.arrayValues) return array.arrayValues.map((a) => (a ? fromArray(a) : null));
  return [];
}

function fromField(field: Field, column: ColumnMetadata | undefined): unknown {
  if (field.isNull) return null;
  if (field.stringValue !== undefined) return fromText(field.stringValue, column?.typeName?.toLowerCase());
  if (field.longValue !== undefined) return field.longValue;
  if (field.doubleValue !== undefined) return field.doubleValue;
  if (field.booleanValue !== undefined) return field.booleanValue;
  if (field.blobValue !== undefined) return Buffer.from(field.blobValue);
  if (field.arrayValue !== undefined) return fromArray(field.arrayValue);
  return null;
}

/** Rows as objects keyed by column label, values as `pg` hands them over for the types QueueBox reads. */
export function decodeDataApiResult<R>(output: ExecuteStatementCommandOutput): QueryResult<R> {
  const columns = output.columnMetadata ?? [];
  const names = columns.map((c, i) => c.label || c.name || `column${i + 1}`);
  const rows = (output.records ?? []).map((record) => {
    const row: Record<string, unknown> = {};
    record.forEach((field, i) => {
      row[names[i] ?? `column${i + 1}`] = fromField(field, columns[i]);
    });
    return row as R;
  });
  return { rows, rowCount: rows.length > 0 ? rows.length : (output.numberOfRecordsUpdated ?? 0) };
}

/**
 * A `SqlExecutor` over the RDS Data API (`@aws-sdk/client-rds-data`): SQL over HTTPS, no connection, no VPC.
 * Each `query` is one `ExecuteStatement` call (autocommit, or inside the transaction of a `tx`), with the
 * statement text derived from the `pg` one by `toDataApiStatement` (named parameters, arrays as one JSON text
 * parameter). `transaction` is `BeginTransaction`, the calls of `fn` with its `transactionId`, then
 * `CommitTransaction` (or `RollbackTransaction` when `fn` throws). A text without values that holds several
 * statements (a migration) runs statement by statement in one transaction.
 *
 * A paused Aurora Serverless v2 cluster answers `DatabaseResumingException` and starts resuming: the call is
 * retried with a doubling wait until `resumeTimeoutMs`. Nothing else is retried here (the SDK client must not
 * either): a statement the service may have run is never sent twice. Errors are translated by
 * `translateDataApiError`.
 *
 * Limits of the service to keep in mind (AWS, "Limitations for the Amazon RDS Data API"): a response of at most
 * 1 MiB and rows of at most 64 KB, a request of at most 4 MiB, a transaction that ends after 3 minutes without a
 * call, one statement per call. `close()` destroys the SDK client.
 */
export function createDataApiExecutor(options: DataApiExecutorOptions): SqlExecutor {
  const { client, resourceArn, secretArn } = options;
  const database = options.database === undefined ? {} : { database: options.database };
  const resumeTimeoutMs = options.resumeTimeoutMs ?? 25_000;
  const resumeBackoffMs = options.resumeBackoffMs ?? 500;
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let sdk: Promise<typeof import('@aws-sdk/client-rds-data')> | undefined;
  const commands = () => {
    sdk ??= import('@aws-sdk/client-rds-data');
    return sdk;
  };

  async function call<O>(send: () => Promise<O>): Promise<O> {
    const deadline = now() + resumeTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await send();
      } catch (error) {
        if (!isResuming(error)) throw translateDataApiError(error);
        const wait = Math.min(resumeBackoffMs * 2 ** (attempt - 1), 4000);
        if (now() + wait > deadline) {
          throw new StoreUnavailableError(
            `The database is still resuming after ${resumeTimeoutMs} ms (DatabaseResumingException)`,
            { cause: error },
          );
        }
        options.onResuming?.(attempt, wait);
        await sleep(wait);
      }
    }
  }

  async function execute<R>(
    text: string,
    values: readonly unknown[] | undefined,
    transactionId: string | undefined,
  ): Promise<QueryResult<R>> {
    const { ExecuteStatementCommand } = await commands();
    const { sql, parameters } = toDataApiStatement(text, values ?? []);
    const output = await call(() =>
      client.send(
        new ExecuteStatementCommand({
          resourceArn,
          secretArn,
          ...database,
          sql,
          ...(parameters.length > 0 ? { parameters } : {}),
          includeResultMetadata: true,
          ...(transactionId === undefined ? {} : { transactionId }),
        }),
      ),
    );
    return decodeDataApiResult<R>(output);
  }

  async function inTransaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const { BeginTransactionCommand, CommitTransactionCommand, RollbackTransactionCommand } =
      await commands();
    const { transactionId } = await call(() =>
      client.send(new BeginTransactionCommand({ resourceArn, secretArn, ...database })),
    );
    if (!transactionId) throw new StoreError('BeginTransaction answered no transactionId');
    const { tx, idle } = transactionExecutor(transactionId);
    let result: T;
    try {
      result = await fn(tx);
      // A call fn started without awaiting it ends before the commit, as it would on one pg connection.
      await idle();
    } catch (error) {
      await idle();
      try {
        await call(() =>
          client.send(new RollbackTransactionCommand({ resourceArn, secretArn, transactionId })),
        );
      } catch {
        // The transaction may be gone already (an error ended it, or it timed out): nothing is left to undo.
      }
      throw error;
    }
    await call(() => client.send(new CommitTransactionCommand({ resourceArn, secretArn, transactionId })));
    return result;
  }

  async function query<R>(
    text: string,
    values: readonly unknown[] | undefined,
    transactionId: string | undefined,
  ): Promise<QueryResult<R>> {
    if (values === undefined || values.length === 0) {
      const statements = splitStatements(text);
      if (statements.length > 1) {
        const runAll = async (tx: SqlExecutor) => {
          let last: QueryResult<R> = { rows: [], rowCount: 0 };
          for (const statement of statements) last = await tx.query<R>(statement);
          return last;
        };
        return transactionId === undefined
          ? inTransaction(runAll)
          : runAll(transactionExecutor(transactionId).tx);
      }
    }
    return execute<R>(text, values, transactionId);
  }

  /**
   * The executor of one open transaction. Its calls go one at a time, in the order they were made: the service
   * answers a call naming a transaction that is still running another with DatabaseErrorException ("Transaction
   * is still running a query") and ends the transaction, where `pg` queues queries on the transaction's connection.
   * `idle()` resolves once every call made so far has ended.
   */
  function transactionExecutor(transactionId: string): { tx: SqlExecutor; idle: () => Promise<void> } {
    let tail: Promise<unknown> = Promise.resolve();
    const tx: SqlExecutor = {
      resultLimits: DATA_API_LIMITS,
      query: <R>(text: string, values?: readonly unknown[]) => {
        const run = tail.then(() => query<R>(text, values, transactionId));
        tail = run.catch(() => {});
        return run;
      },
      transaction: (fn) => fn(tx),
      close: async () => {},
    };
    return { tx, idle: () => tail.then(() => {}) };
  }

  let closed = false;
  return {
    resultLimits: DATA_API_LIMITS,
    query: (text, values) => query(text, values, undefined),
    transaction: inTransaction,
    async close() {
      if (closed) return;
      closed = true;
      client.destroy();
    },
  };
}
