import type { InboxRow, OutboxRow, RowId } from '../messages.ts';
import type { MessageState, Table } from '../states.ts';

/** Most groups `AdminStore.stats()` reports per table in `deadByTopic` / `deadBySource` (the largest first). */
export const ADMIN_DEAD_GROUPS_LIMIT = 100;

/** Most rows one `AdminStore.list()` page holds. */
export const ADMIN_LIST_MAX_LIMIT = 500;

/** Most rows one bulk admin statement (requeue, purge) touches. */
export const ADMIN_MAX_BATCH_SIZE = 10_000;

/** Counts of one table. */
export interface AdminTableStats {
  /** Rows per state; rows whose state literal this version does not know count as `Failed`. */
  readonly counts: Readonly<Record<MessageState, number>>;
  /**
   * How long the longest-waiting due pending row has been due (now − its scheduled_at), in milliseconds by the
   * database clock; `null` when no pending row is due. Rows scheduled for later (a delay, a retry's backoff) are
   * not late, so they do not count.
   */
  readonly oldestPendingAgeMs: number | null;
}

/** What `AdminStore.stats()` answers. */
export interface AdminStats {
  readonly outbox: AdminTableStats & {
    /** Dead rows per topic, at most `ADMIN_DEAD_GROUPS_LIMIT` topics, the most dead rows first. */
    readonly deadByTopic: Readonly<Record<string, number>>;
  };
  readonly inbox: AdminTableStats & {
    /** Dead rows per source, at most `ADMIN_DEAD_GROUPS_LIMIT` sources, the most dead rows first. */
    readonly deadBySource: Readonly<Record<string, number>>;
  };
}

/**
 * What `AdminStore.gauges()` answers for one table: what a periodic refresh of the gauges needs, read without
 * visiting the finished rows (which retention keeps by the million): the pending, processing, dead and unknown-state
 * rows counted exactly from the partial indexes that hold them, and the finished rows estimated.
 */
export interface AdminTableGauges {
  /** Exact counts of the rows that are not finished (sent/processed); `Failed` counts unknown state literals. */
  readonly counts: Readonly<Record<Exclude<MessageState, 'Sent'>, number>>;
  /**
   * Sent outbox / processed inbox rows, estimated from the database's statistics of the table (PostgreSQL:
   * `pg_class.reltuples` scaled to the table's current size, as the planner does, less the exact counts; SQL Server:
   * `sys.partitions.rows`, less the same); `null` while the database has none (a table never vacuumed or
   * analysed). Never read from the rows themselves.
   */
  readonly finishedEstimate: number | null;
  /** As `AdminTableStats.oldestPendingAgeMs`. */
  readonly oldestPendingAgeMs: number | null;
}

/** What `AdminStore.gauges()` answers. */
export interface AdminGauges {
  readonly outbox: AdminTableGauges;
  readonly inbox: AdminTableGauges;
}

/** Filters and paging of `AdminStore.list()`. Filters combine with AND; absent filters match every row. */
export interface AdminListOptions {
  /** Rows in this state; `Failed` lists rows whose state literal this version does not know. */
  readonly state?: MessageState;
  /** Outbox rows of exactly this topic (ignored for the inbox). */
  readonly topic?: string;
  /** Inbox rows of exactly this source (ignored for the outbox). */
  readonly source?: string;
  /** The `nextCursor` of the previous page; absent for the first page. */
  readonly cursor?: string;
  /** Most rows of the page, 1…`ADMIN_LIST_MAX_LIMIT` (larger values are clamped). */
  readonly limit: number;
}

/**
 * One page of rows in ascending id order. Paging is by keyset on the id, so rows inserted or deleted between
 * pages never shift a page: every row that exists throughout is listed exactly once.
 */
export interface AdminPage<R> {
  readonly rows: readonly R[];
  /** Pass as `cursor` for the next page; `null` when this page is the last. */
  readonly nextCursor: string | null;
}

/** Which dead rows a requeue takes. Both parts combine with AND; neither takes every dead row of the table. */
export interface RequeueSelection {
  /** Only these rows. Rows that are not dead are left alone (not an error). */
  readonly ids?: readonly RowId[];
  /** Only dead rows of this topic (outbox) or source (inbox). */
  readonly topic?: string;
  readonly source?: string;
}

/** Options of `AdminStore.requeue()`. */
export interface RequeueOptions {
  /** Change nothing; answer what a complete run would do. Default false. */
  readonly dryRun?: boolean;
  /** Most rows this call requeues (1…`ADMIN_MAX_BATCH_SIZE`). Default 500. */
  readonly batchSize?: number;
}

/** What one `AdminStore.requeue()` call did (or, in a dry run, would do). */
export interface RequeueResult {
  readonly dryRun: boolean;
  /**
   * Rows requeued by this call. In a dry run: every dead row the selection matches, that is what calls until
   * `more` is false would requeue.
   */
  readonly count: number;
  /** Ids requeued by this call, ascending. In a dry run: the first `batchSize` of the matching rows. */
  readonly ids: readonly RowId[];
  /** More matching dead rows may remain: call again (a dry run: `count` exceeds `ids`). */
  readonly more: boolean;
  /**
   * When there are some: the dead keyed outbox rows of the selection left dead because a row of their key is being
   * delivered (`key_in_flight`). A claim takes a key's smallest pending-or-processing id when it is pending, so such
   * a row, requeued, would be claimed beside the later row still in delivery. On the inbox: the dead rows with an
   * aggregate id whose source and aggregate id has a row processing (the relay forwards them in id order), with the
   * aggregate id as `key`. A dry run reports them; a requeue reports them with a call after which the caller stops:
   * the last (`more: false`), or one that requeued nothing.
   */
  readonly skipped?: RequeueSkipped;
  /**
   * Outbox only, when there are some: the dead keyed rows this call chose and left dead because another
   * transaction held their key's insert lock (`key_busy`): an application's enqueue of the key that has not
   * committed, or another requeue or replay of the key. A requeue takes the key locks without waiting, so it never
   * holds up writers of the keys it has locked while it waits for one it has not; such rows stay dead until a
   * later call finds the key free. A dry run takes no lock and reports none.
   */
  readonly keyBusy?: RequeueBusy;
}

/**
 * A dead row a requeue left dead, and the row of its key (outbox) or source and aggregate id (inbox, `key` is the
 * aggregate id) being processed (smallest processing id).
 */
export interface RequeueKeyInFlight {
  readonly id: RowId;
  readonly key: string;
  readonly processingId: RowId;
}

/** The rows a requeue left dead for `key_in_flight`: how many in all, and the first of them, ascending id. */
export interface RequeueSkipped {
  readonly reason: 'key_in_flight';
  /** Every such row of the selection. */
  readonly count: number;
  /** The first of them (a store may list only some), ascending id. */
  readonly rows: readonly RequeueKeyInFlight[];
}

/** A dead keyed outbox row a requeue left dead because another transaction held its key's insert lock. */
export interface RequeueKeyBusy {
  readonly id: RowId;
  readonly key: string;
}

/**
 * The rows one requeue call left dead for `key_busy`: how many, and the first of them, ascending id. Only rows the
 * call chose count (a later call chooses them again, first, while they stay dead).
 */
export interface RequeueBusy {
  readonly reason: 'key_busy';
  /** Every such row of this call. */
  readonly count: number;
  /** The first of them (a store may list only some), ascending id. */
  readonly rows: readonly RequeueKeyBusy[];
}

/** What `AdminStore.replay()` did. */
export type ReplayResult =
  | { readonly status: 'replayed'; readonly id: RowId }
  | { readonly status: 'not_found' }
  | { readonly status: 'not_sent'; readonly state: MessageState }
  /**
   * A keyed row whose key's insert lock another transaction held (an application's enqueue of that key not yet
   * committed, a requeue or another replay of it): nothing was copied; try again. A replay takes the lock without
   * waiting, as a requeue does, so an operator is never kept waiting behind an application's transaction.
   */
  | { readonly status: 'key_busy'; readonly key: string };

/**
 * What `AdminStore.redact()` did. `not_final`: the row is pending or processing (or in a state this version does not
 * know), so it is still being delivered or forwarded and nothing was changed: wait until it settles, or mark it dead
 * first.
 */
export type RedactResult =
  | { readonly status: 'redacted' }
  | { readonly status: 'not_found' }
  | { readonly status: 'not_final'; readonly state: MessageState };

/** One purge batch. */
export interface PurgeOptions {
  readonly table: Table;
  /** `Sent` is outbox `sent` and inbox `processed`. */
  readonly state: 'Sent' | 'Dead';
  /** Only rows whose last change (updated_at) is older than this, by the database clock, in milliseconds. */
  readonly olderThanMs: number;
  /** Most rows deleted by this call (1…`ADMIN_MAX_BATCH_SIZE`). */
  readonly batchSize: number;
}

/**
 * The operator's operations on both tables (docs/design.md §6 Admin and Retention). Every call is one short statement
 * (bulk work is one bounded batch per call; callers loop), never one long transaction.
 */
export interface AdminStore {
  /**
   * Counts per state, the oldest due pending row's age, and dead rows per topic / source: exact, so it counts every
   * finished row too (seconds at millions of them). For an operator's question (`/admin/stats`, `queuebox stats`);
   * a periodic refresh reads {@link AdminStore.gauges} instead.
   */
  stats(): Promise<AdminStats>;
  /**
   * For a periodic refresh of the gauges: per table, the pending, processing, dead and unknown-state rows counted
   * from the partial indexes that hold them, the oldest due pending row's age, and the finished rows estimated from
   * the table's statistics. One statement per table plus the oldest-pending one; none reads the finished rows (an
   * outside audit: the local runtime's 15-second refresh through `stats()` took 4 s, a parallel scan, at 15M sent
   * rows).
   */
  gauges(): Promise<AdminGauges>;
  /**
   * The `oldestPendingAgeMs` of `stats()` for one table alone: how long its longest-waiting due pending row has been
   * due, in milliseconds by the database clock, or `null` when no pending row is due. One short statement over the
   * pending rows only (which the partial pending indexes keep few, whatever the table holds): the ticks sample it
   * before every drain, where `stats()` would count every row of both tables.
   */
  oldestPendingAgeMs(table: Table): Promise<number | null>;
  /**
   * The `counts.Dead` of `stats()` for one table alone, read from an index that holds the dead rows (one short
   * statement, whatever the sent rows kept for retention number): what the alarm gauges publish after a write.
   */
  deadRows(table: Table): Promise<number>;
  /** One page of rows, filtered, in ascending id order. */
  list(table: 'outbox', options: AdminListOptions): Promise<AdminPage<OutboxRow>>;
  list(table: 'inbox', options: AdminListOptions): Promise<AdminPage<InboxRow>>;
  /**
   * dead → pending for up to `batchSize` selected rows, in id order: attempt 0, due now, no claim. `last_error`
   * is left as it is: the error of the row's last failed attempt, kept as history (a sent row keeps it too). Only the `dead` literal is
   * requeued: rows in any other state are ignored, so a requeue never disturbs live work.
   */
  requeue(table: Table, selection: RequeueSelection, options?: RequeueOptions): Promise<RequeueResult>;
  /**
   * A new pending outbox row copied from a sent one (topic, key, payload, headers, max_attempts). Rows that are
   * not sent are refused (`not_sent`); a keyed row whose key's insert lock another transaction holds is not copied
   * (`key_busy`); the original row is not changed.
   */
  replay(outboxId: RowId): Promise<ReplayResult>;
  /**
   * Erases the message data of one row in a final state (outbox `sent` or `dead`, inbox `processed` or `dead`), for
   * an erasure request: `payload` becomes JSON `null`, `headers` `{}` and `last_error` NULL; on the inbox
   * `aggregate_id` and `correlation_id` become NULL too (both may hold a customer id; nothing reads them from a row
   * that is final). One statement, which checks the state on the row it changes. Everything else stays: the state,
   * the id, the outbox topic and key, the inbox source, idempotency key and event type (the idempotency key is the
   * inbox's deduplication memory: a sender's retry is still answered as a duplicate) and every timestamp,
   * `updated_at` included (retention deletes the row when it would have). A row that is not final is refused
   * (`not_final`), since it is still being delivered. The outbox rows the relay forwarded from an inbox row (headers
   * `x-inbox-id`) are rows of their own: an inbox redact leaves them as they are.
   */
  redact(table: Table, id: RowId): Promise<RedactResult>;
  /** Deletes one batch of sent/processed or dead rows older than `olderThanMs`; answers how many. */
  purge(options: PurgeOptions): Promise<number>;
  /**
   * Only on a store whose database vacuums nothing by itself (PGlite: one single-user session, no autovacuum
   * launcher): a plain `VACUUM` of each of `tables`, one statement each, so the space of the rows a purge deleted is
   * used again; without it the tables grew by what every retention run deleted. Absent where the server does this
   * itself (PostgreSQL's autovacuum, SQL Server's ghost cleanup): callers test for it.
   */
  vacuum?(tables: readonly Table[]): Promise<void>;
  /**
   * When the next pending row of `table` becomes due: the earliest `scheduled_at` of its pending rows scheduled
   * after now (database clock), or `null` when none is. Rows due already are a drain's business, not a
   * scheduler's, so they are left out. The time is on this process's clock: the database's, moved by the
   * difference between the two clocks (read with it), so a deferred tick books its wake-up when the row is due by
   * the database's clock however far the two are apart.
   */
  nextDue(table: Table, options?: NextDueOptions): Promise<Date | null>;
}

/** Options of `AdminStore.nextDue()`. */
export interface NextDueOptions {
  /** Inbox only: count rows of these sources alone (the relay's push sources). Default every source. */
  readonly sources?: readonly string[];
}
