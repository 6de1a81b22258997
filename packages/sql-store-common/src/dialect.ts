import type { JsonValue, RowId } from '@queuebox/core';

/**
 * One SQL statement: its text and the values that fill its parameters. The shape of `values` is the dialect's
 * (`$1…` positional values on PostgreSQL, typed `@name` parameters on SQL Server); the shared logic only carries
 * it from a statement builder to the executor.
 */
export interface Statement<V = unknown> {
  readonly text: string;
  readonly values: V;
}

/** What a query answers: the rows and how many rows the statement returned or changed. */
export interface QueryResult<R> {
  readonly rows: R[];
  readonly rowCount: number;
}

/**
 * The part of a store's executor the shared logic uses: `query` runs one statement (or batch) with the dialect's
 * parameters, `transaction` runs `fn` in one transaction on the `tx` it hands over, committing when `fn` resolves
 * and rolling back when it throws. Each store's own executor has this shape and more.
 */
export interface SqlExecutor<V = unknown> {
  query<R = Record<string, unknown>>(text: string, values?: V): Promise<QueryResult<R>>;
  transaction<T>(fn: (tx: SqlExecutor<V>) => Promise<T>): Promise<T>;
}

/**
 * How a dialect's driver hands columns over — the only part of turning a row into core's row types that differs
 * between databases. Each reader throws core's `StoreError` for a value it cannot read.
 */
export interface ColumnReaders {
  /** A bigint identity as a decimal string. */
  readonly toRowId: (value: unknown) => RowId;
  /** A JSON column (`payload`, `headers`): parsed already by some drivers, text for others. */
  readonly toJson: (value: unknown, column: string) => JsonValue;
  /** A timestamp column as a `Date`. */
  readonly toDate: (value: unknown) => Date;
  /** A claim token in lower case, or null when the row holds none. */
  readonly toClaimToken: (value: unknown) => string | null;
}
