import type { RowId, Store, Table } from '@queuebox/core';

/**
 * A store under contract test, migrated into a fresh schema of its own, plus the test-only hooks that arrange
 * states the port cannot reach (the database clock decides due times and leases, so tests move the rows in time
 * instead of waiting).
 */
export interface StoreHarness {
  readonly store: Store;
  /** The schema the store was migrated into (`t_<prefix>_<random>`). */
  readonly schema: string;
  /** Rows of the concurrency test. Default 10,000; an implementation may scale it down, saying so. */
  readonly concurrencyRows?: number;
  /**
   * Whether the outbox claim leaves a payload over `deferPayloadsOverBytes` out of its answer (null, the row marked
   * with its size) for the poller to read with `get` just before its delivery. Default true; the RDS Data API store
   * answers it whole, reading its large columns in chunks under the API's own limits.
   */
  readonly defersLargePayloads?: boolean;
  /**
   * Opens a store of the same kind, not migrated, on a new schema that holds only another migration tool's
   * `schema_migrations`, as an application's own schema may (golang-migrate's: version bigint, dirty boolean or bit,
   * at its 12th migration). `drop` closes that store and drops the schema.
   */
  openOnForeignVersionTable(): Promise<ForeignVersionSchema>;
  /** Sets `lease_until` in the past for the processing rows of `table` (only `ids` when given); returns the count. */
  expireLeases(table: Table, ids?: readonly RowId[]): Promise<number>;
  /** Sets `scheduled_at` in the past for the pending rows of `table` (only `ids` when given); returns the count. */
  makeDue(table: Table, ids?: readonly RowId[]): Promise<number>;
  /**
   * Moves rows `ms` milliseconds into the past: every timestamp of the row (created/received, updated, scheduled,
   * sent/processed) goes back by `ms`, so age-based operations (purge, oldest pending age) see old rows.
   */
  backdate(table: Table, ids: readonly RowId[], ms: number): Promise<void>;
  /** Writes `literal` into the state column of one row, e.g. a literal this version does not know. */
  setStateLiteral(table: Table, id: RowId, literal: string): Promise<void>;
  /**
   * Makes one row unreadable for the store's row mapping, as plain SQL could leave it: on SQL Server a payload
   * that is not one JSON value (the check constraint bypassed, as rows stored before migration 0003 may be); on
   * PostgreSQL, whose JSONB cannot hold such a payload, a creation time in the year 294000, which no `Date` holds
   * (`infinity` reads as the last instant a Date holds).
   */
  makeUnreadable(table: Table, id: RowId): Promise<void>;
  /** Row counts by stored state literal; states without rows are absent. */
  countByState(table: Table): Promise<Record<string, number>>;
  /** Deletes every row of both tables (between tests that passed). */
  deleteAllRows(): Promise<void>;
  /** Drops the schema and everything in it. */
  dropSchema(): Promise<void>;
  /** Closes the store and the hooks' own connections. */
  close(): Promise<void>;
}

/** A store opened on a schema whose `schema_migrations` is another tool's (`openOnForeignVersionTable`). */
export interface ForeignVersionSchema {
  readonly store: Store;
  readonly schema: string;
  drop(): Promise<void>;
}

/** The hooks every dialect writes in its own SQL. */
export type StoreHooks = Pick<
  StoreHarness,
  | 'expireLeases'
  | 'makeDue'
  | 'backdate'
  | 'setStateLiteral'
  | 'makeUnreadable'
  | 'countByState'
  | 'deleteAllRows'
  | 'dropSchema'
>;

/** What the PostgreSQL-family hooks need: one way to run a parameterised statement. */
export type PostgresQuery = (text: string, values?: readonly unknown[]) => Promise<{ rows: unknown[] }>;
