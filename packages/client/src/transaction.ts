/**
 * Which driver's transaction the application handed to `enqueue`, told by shape so neither driver has to be
 * loaded (or be the same copy as ours) to recognise its objects.
 */
import { describeValue } from '@queuebox/core';
import { TransactionRequiredError } from './errors.ts';
import type { SqlQueryable } from './queryable.ts';

/**
 * A `pg` `Client` or `PoolClient` inside `BEGIN … COMMIT` (anything with pg's `query(text, values)` answering
 * `{ rows }`). A `pg.Pool` does not fit the type (`totalCount`), nor does a handle with `transaction()`; both are
 * refused at run time too.
 */
export interface PgTransactionClient {
  // The parameters of SqlQueryable's `query`: an object literal `{ query: (text, values) => … }` handed to enqueue
  // gets its parameters' types from the union only when its members' `query` take the same parameters.
  query(text: string, values: unknown[]): Promise<{ rows: unknown[] }>;
  /** pg ≥ 8.x: `'I'` idle, `'T'` in a transaction, `'E'` in a failed transaction, `null` before connecting. */
  getTransactionStatus?(): string | null;
  /** Only a `pg.Pool` has it: a pool is not a transaction. */
  readonly totalCount?: never;
  /** Only a handle that opens transactions has it (a TypeORM `DataSource`/`EntityManager`): not a transaction. */
  readonly transaction?: never;
}

/**
 * An mssql `Transaction` after `begin()`, as enqueue recognises it: by shape, declared here rather than imported
 * from mssql, so the client's declarations name nothing of mssql's. (They did: with `skipLibCheck` and without
 * `@types/mssql` installed, the import resolved to nothing and made `EnqueueTransaction` `any`, so any value
 * type-checked as a transaction.) mssql's own `Transaction` fits it.
 */
export interface MssqlTransaction {
  request(): unknown;
  begin(...args: never[]): unknown;
  commit(...args: never[]): unknown;
  rollback(...args: never[]): unknown;
}

/**
 * The application's open transaction: a pg client after `BEGIN`, any other PostgreSQL driver's or ORM's
 * transaction as a `SqlQueryable`, or an mssql `Transaction` after `begin()`.
 */
export type EnqueueTransaction = PgTransactionClient | SqlQueryable | MssqlTransaction;

/** What `detectTransaction` recognised. */
export type DetectedTransaction =
  | { readonly driver: 'pg'; readonly client: PgTransactionClient }
  | { readonly driver: 'queryable'; readonly queryable: SqlQueryable }
  | { readonly driver: 'mssql'; readonly transaction: MssqlTransaction };

const EXPECTED =
  "enqueue needs the application's open transaction: a pg Client/PoolClient after BEGIN, an mssql Transaction after begin(), or { query(text, values) } running on another driver's transaction (sqlTemplate(tag) for a tagged template)";

/** Why a pool cannot be used, said once for both drivers. */
const NOT_ATOMIC =
  'a pool is not a transaction: each statement may run on another connection in its own transaction, so the outbox row would not commit or roll back with the business write';

/**
 * Recognises the driver of `tx`, or throws `TransactionRequiredError`:
 *
 * - mssql `Transaction`: has `request()`, `begin()`, `commit()`, `rollback()`. An mssql `ConnectionPool`
 *   (`request()` and `transaction()`) and a `Request` (`input()`, `execute()`) are refused.
 * - pg `Client`/`PoolClient`: has `query()` and reports its transaction status (pg ≥ 8.x
 *   `getTransactionStatus()`): `null` (never connected), `'I'` (no `BEGIN`, or the transaction ended) and `'E'`
 *   (the transaction failed and awaits ROLLBACK) are refused. The status is the one of the client's last completed exchange: right after a
 *   failed query pg may still say `'T'`, and enqueue's first statement then fails with SQLSTATE 25P02 (a
 *   `StoreError`) instead.
 * - Anything else with `query()` is a `SqlQueryable` (another driver or ORM, or a pg client that cannot tell its
 *   status): whether it runs in an open transaction is checked by the database when enqueue writes
 *   (`guardedEnqueueStatement`). A `pg.Pool` (`totalCount`, `idleCount`) is refused here, and so is a database
 *   handle that opens transactions itself (`transaction()`, e.g. PGlite or a TypeORM `EntityManager`).
 */
export function detectTransaction(tx: unknown): DetectedTransaction {
  if (typeof tx === 'function') {
    throw new TransactionRequiredError(
      `${EXPECTED}; got a function — a Knex transaction or a driver's tagged template (postgres.js, Drizzle's sql) is one: wrap it as a query function, e.g. sqlTemplate((strings, ...values) => trx.raw(strings.join('?'), values)) for Knex`,
    );
  }
  if (typeof tx !== 'object' || tx === null) {
    throw new TransactionRequiredError(`${EXPECTED}; got ${describeValue(tx)}`);
  }
  const t = tx as Record<string, unknown>;
  const has = (name: string) => typeof t[name] === 'function';

  if (has('request')) {
    if (has('begin') && has('commit') && has('rollback')) {
      return { driver: 'mssql', transaction: tx as MssqlTransaction };
    }
    if (has('transaction')) {
      throw new TransactionRequiredError(
        `${EXPECTED}; got an mssql ConnectionPool — ${NOT_ATOMIC}. Open one with new mssql.Transaction(pool), await begin(), enqueue, then commit()`,
      );
    }
  }
  if (has('input') && has('execute')) {
    throw new TransactionRequiredError(
      `${EXPECTED}; got an mssql Request — pass the Transaction it belongs to, so the row is written in it`,
    );
  }
  if (has('query')) {
    if (has('connect') && 'totalCount' in t && 'idleCount' in t) {
      throw new TransactionRequiredError(
        `${EXPECTED}; got a pg Pool — ${NOT_ATOMIC}. Check out a client with pool.connect(), run BEGIN, enqueue on that client, then COMMIT`,
      );
    }
    if (has('transaction')) {
      throw new TransactionRequiredError(
        `${EXPECTED}; got a database handle with transaction() — pass the transaction it opens instead (for an ORM, { query: (text, values) => … } running on that transaction)`,
      );
    }
    if (!has('getTransactionStatus')) return { driver: 'queryable', queryable: tx as SqlQueryable };
    const status = (tx as { getTransactionStatus(): unknown }).getTransactionStatus();
    if (status === null) {
      // pg's status before the server's first ReadyForQuery: the client never connected (or has not finished
      // connecting). Its queries would wait in pg's queue for a connect() that may never come, and then run outside
      // any transaction.
      throw new TransactionRequiredError(
        `${EXPECTED}; the pg client is not connected (getTransactionStatus() is null): connect() it, run BEGIN, then enqueue`,
      );
    }
    if (status === 'I') {
      throw new TransactionRequiredError(
        `${EXPECTED}; the pg client is not inside a transaction (run BEGIN first; BEGIN must have completed)`,
      );
    }
    if (status === 'E') {
      throw new TransactionRequiredError(
        `${EXPECTED}; the pg client's transaction failed earlier and must be rolled back`,
      );
    }
    return { driver: 'pg', client: tx as PgTransactionClient };
  }
  throw new TransactionRequiredError(`${EXPECTED}; got ${describeValue(tx)}, of no known driver`);
}
