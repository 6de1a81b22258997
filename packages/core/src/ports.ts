import type {
  Headers,
  InboxRow,
  JsonValue,
  NewInboxMessage,
  NewOutboxMessage,
  OutboxRow,
  RowClaim,
  RowId,
} from './messages.ts';
import type { MessageState, Table } from './states.ts';

/**
 * What a settle did. A settle changes only rows whose claim token still matches; the others are `stale`: their
 * lease expired and they were reclaimed or taken over, so the caller lost them and must not act as their owner.
 */
export interface SettleReport<S extends string = string> {
  readonly settled: readonly { readonly id: RowId; readonly state: S }[];
  readonly stale: readonly RowId[];
}

/** Options of a claim. */
export interface ClaimOptions {
  /** Most rows to claim. */
  readonly batchSize: number;
  /** How long the claim holds the rows, in milliseconds. */
  readonly leaseMs: number;
}

/** Counts of a reclaim step. */
export interface ReclaimReport {
  /** Rows returned to pending. */
  readonly returned: number;
  /** Rows that had no attempt left and went dead. */
  readonly dead: number;
}

/** Outbox success: the destination accepted the message. */
export interface OutboxSentItem extends RowClaim {
  readonly destination: string;
}

/** Outbox failure that may be retried. */
export interface OutboxRetryItem extends RowClaim {
  readonly error: string;
  /** Delay before the next attempt, in milliseconds. */
  readonly delayMs: number;
  readonly destination?: string | null;
}

/** Outbox failure that no retry can fix (no route, transform rejected, permanent destination answer). */
export interface OutboxDeadItem extends RowClaim {
  readonly reason: string;
  readonly destination?: string | null;
  /** Whether a delivery was attempted (counts one attempt). Default false. */
  readonly attempted?: boolean;
}

/**
 * The outbox table. Every operation is one statement or one short transaction and keeps no session state, so it
 * works behind a connection pooler.
 */
export interface OutboxStore {
  /** Inserts rows in state pending; returns their ids in the order given. */
  insert(messages: readonly NewOutboxMessage[]): Promise<RowId[]>;
  /**
   * pending → processing for due rows, with one new claim token and a lease. A row with a key is claimable only
   * when no row of the same key with a smaller id is pending or processing. Rows with an unknown state literal are
   * never claimed.
   */
  claim(options: ClaimOptions): Promise<OutboxRow[]>;
  /** processing → sent. */
  markSent(items: readonly OutboxSentItem[]): Promise<SettleReport<'Sent'>>;
  /** Counts an attempt; processing → pending at now + delay, or → dead when no attempt remains. */
  retry(items: readonly OutboxRetryItem[]): Promise<SettleReport<'Pending' | 'Dead'>>;
  /** processing → dead with a reason. */
  markDead(items: readonly OutboxDeadItem[]): Promise<SettleReport<'Dead'>>;
  /** processing → pending without counting an attempt (work given back before it was tried, e.g. at shutdown). */
  release(items: readonly RowClaim[]): Promise<SettleReport<'Pending'>>;
  /** Expired claims: processing → pending counting the attempt they used, or → dead when none remains. */
  reclaimExpired(limit?: number): Promise<ReclaimReport>;
  /** One row by id, or undefined. */
  get(id: RowId): Promise<OutboxRow | undefined>;
}

/** The result of storing an inbox message: new, or a repeat of (source, idempotency key). */
export type StoreResult =
  | { readonly status: 'stored'; readonly id: RowId }
  | { readonly status: 'duplicate'; readonly id: RowId };

/** Options of an inbox claim. */
export interface InboxClaimOptions extends ClaimOptions {
  /** Only rows of these sources. */
  readonly sources: readonly string[];
  /**
   * Also take over rows whose lease expired (processing → processing with a new token, counting an attempt).
   * Pull claims do; the relay leaves that to its reclaim step.
   */
  readonly takeOverExpired?: boolean;
}

/** Inbox retry for a pull worker. */
export interface InboxRetryItem extends RowClaim {
  readonly error: string;
  readonly delayMs: number;
}

/** Inbox dead letter: a pull worker gave up, or the relay's topic rendered empty. */
export interface InboxDeadItem extends RowClaim {
  readonly reason: string;
}

/** The relay's forward: the outbox row to write for a claimed inbox row. */
export interface ForwardItem extends RowClaim {
  readonly outbox: NewOutboxMessage;
}

/** The inbox table. */
export interface InboxStore {
  /** (store) → pending, or `duplicate` when (source, idempotency key) exists; answered by the unique index. */
  store(message: NewInboxMessage): Promise<StoreResult>;
  /** (store) → dead with a reason (an AMQP message that is not JSON or that the transform rejected). */
  storeDead(message: NewInboxMessage, reason: string): Promise<StoreResult>;
  /** pending → processing for due rows of the given sources (and takeover of expired claims when asked). */
  claim(options: InboxClaimOptions): Promise<InboxRow[]>;
  /** processing → processed. */
  complete(items: readonly RowClaim[]): Promise<SettleReport<'Sent'>>;
  /** Counts an attempt; processing → pending at now + delay. */
  retry(items: readonly InboxRetryItem[]): Promise<SettleReport<'Pending'>>;
  /** processing → dead. */
  giveUp(items: readonly InboxDeadItem[]): Promise<SettleReport<'Dead'>>;
  /**
   * For each item, in one transaction: the outbox row is inserted and the inbox row goes processing → processed.
   * An item whose claim is stale writes no outbox row.
   */
  forward(
    items: readonly ForwardItem[],
  ): Promise<SettleReport<'Sent'> & { readonly outboxIds: readonly RowId[] }>;
  /** Expired claims of the given sources (the relay's): processing → pending, counting the attempt they used. */
  reclaimExpired(sources: readonly string[], limit?: number): Promise<ReclaimReport>;
  /** One row by id, or undefined. */
  get(id: RowId): Promise<InboxRow | undefined>;
}

/** One applied migration. */
export interface AppliedMigration {
  readonly version: number;
  readonly name: string;
}

/** What a migration run did. */
export interface MigrationReport {
  readonly applied: readonly AppliedMigration[];
  readonly current: number;
}

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
}

/** What `AdminStore.replay()` did. */
export type ReplayResult =
  | { readonly status: 'replayed'; readonly id: RowId }
  | { readonly status: 'not_found' }
  | { readonly status: 'not_sent'; readonly state: MessageState };

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
  /** Counts per state, the oldest due pending row's age, and dead rows per topic / source. */
  stats(): Promise<AdminStats>;
  /** One page of rows, filtered, in ascending id order. */
  list(table: 'outbox', options: AdminListOptions): Promise<AdminPage<OutboxRow>>;
  list(table: 'inbox', options: AdminListOptions): Promise<AdminPage<InboxRow>>;
  /**
   * dead → pending for up to `batchSize` selected rows, in id order: attempt 0, due now, no claim. `last_error`
   * keeps the reason the row died (history) until the next attempt overwrites it. Only the `dead` literal is
   * requeued: rows in any other state are ignored, so a requeue never disturbs live work.
   */
  requeue(table: Table, selection: RequeueSelection, options?: RequeueOptions): Promise<RequeueResult>;
  /**
   * A new pending outbox row copied from a sent one (topic, key, payload, headers, max_attempts). Rows that are
   * not sent are refused (`not_sent`); the original row is not changed.
   */
  replay(outboxId: RowId): Promise<ReplayResult>;
  /** Deletes one batch of sent/processed or dead rows older than `olderThanMs`; answers how many. */
  purge(options: PurgeOptions): Promise<number>;
  /**
   * When the next pending row of `table` becomes due: the earliest `scheduled_at` of its pending rows scheduled
   * after now (database clock), or `null` when none is. Rows due already are a drain's business, not a
   * scheduler's, so they are left out. A deferred tick books its wake-up at this time.
   */
  nextDue(table: Table, options?: NextDueOptions): Promise<Date | null>;
}

/** Options of `AdminStore.nextDue()`. */
export interface NextDueOptions {
  /** Inbox only: count rows of these sources alone (the relay's push sources). Default every source. */
  readonly sources?: readonly string[];
}

/** What a migration run reports as it goes. */
export interface MigrationProgress {
  readonly phase: 'applying' | 'applied';
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
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A message as a publisher sends it: the routed, transformed outbox row. */
export interface OutgoingMessage {
  /** The outbox row id; publishers use it as the idempotency / message id. */
  readonly id: RowId;
  readonly topic: string;
  readonly key: string | null;
  readonly payload: JsonValue;
  readonly headers: Headers;
  /** Attempts already made before this one. */
  readonly attempt: number;
}

/** What became of one publish. */
export type PublishOutcome =
  | { readonly kind: 'sent' }
  | { readonly kind: 'retry'; readonly error: string; readonly retryAfterMs?: number }
  | { readonly kind: 'dead'; readonly error: string };

/** Sends messages to one configured destination. */
export interface Publisher {
  publish(message: OutgoingMessage, signal?: AbortSignal): Promise<PublishOutcome>;
  close(): Promise<void>;
}

/** Time, injectable for tests. Claims and leases use the database clock, not this one. */
export interface Clock {
  now(): number;
}

/** The machine's clock. */
export const systemClock: Clock = { now: () => Date.now() };
