import type { AdminStore } from './admin-store.ts';
import type { InboxStore } from './inbox-store.ts';
import type { OutboxStore } from './outbox-store.ts';

/** One applied migration. */
export interface AppliedMigration {
  readonly version: number;
  readonly name: string;
}

/**
 * A schema migrated further than this version knows: a newer QueueBox applied migrations this one does not have
 * (a rolling upgrade, or a rollback of the code alone). Not refused: an older process must keep running on a
 * newer schema during a rolling upgrade, and migrations are written to allow it; but the operator should know.
 */
export interface NewerSchema {
  /** The highest migration version the schema has applied. */
  readonly applied: number;
  /** The highest migration version this version of QueueBox knows. */
  readonly known: number;
}

/** What a migration run did. */
export interface MigrationReport {
  readonly applied: readonly AppliedMigration[];
  readonly current: number;
  /** Set when the schema holds a migration newer than any this version knows (`current` above the latest known). */
  readonly newer?: NewerSchema;
}

/** What a migration run reports as it goes. */
export interface MigrationProgress {
  /**
   * `retrying`: the migration's transaction was a deadlock's victim, or (PostgreSQL) waited longer than its lock
   * timeout for a table, and rolled back whole; it runs again.
   */
  readonly phase: 'applying' | 'retrying' | 'applied';
  readonly version: number;
  readonly name: string;
  /** Position of this migration among those known (1-based), and how many are known. */
  readonly index: number;
  readonly total: number;
}

/** Options of `Store.migrate`. */
export interface MigrationProgressOptions {
  /** Told of each migration's progress. Default: nothing. */
  readonly onMigration?: (progress: MigrationProgress) => void;
}

/** A database holding both tables. */
export interface Store {
  readonly provider: 'postgres' | 'pglite' | 'sqlserver';
  readonly outbox: OutboxStore;
  readonly inbox: InboxStore;
  /** The operator's operations: stats, lists, requeue, replay, purge. */
  readonly admin: AdminStore;
  /**
   * Applies pending migrations; safe when several processes migrate at once. `onMigration` hears of each pending
   * migration before it runs (`applying`) and after it committed (`applied`), e.g. for progress in a terminal.
   */
  migrate(options?: MigrationProgressOptions): Promise<MigrationReport>;
  /**
   * The schema's install id: 32 lower-case hex digits, random, made once by migration 0005 and read once per store.
   * Every outbox message id holds it (`outboxMessageId`). Fails with a `StoreError` naming migration 0005 when the
   * schema has none (not migrated yet).
   */
  installId(): Promise<string>;
  /**
   * Only on a store no other process can reach (PGlite, whose data directory this process holds locked): ends the
   * lease of every processing row now, outbox and inbox, so the reclaim steps return them at their next run as they
   * return any expired claim (the attempt counted). Any such row is a claim of a process that died holding the
   * directory (kill -9), which would otherwise hold its rows, and every later row of their keys and aggregate ids,
   * until the lease ran out (5 minutes by default). Answers how many rows of each table it found.
   */
  releaseClaims?(): Promise<{ readonly outbox: number; readonly inbox: number }>;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
