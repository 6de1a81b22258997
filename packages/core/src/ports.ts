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

/** A database holding both tables. */
export interface Store {
  readonly provider: 'postgres' | 'pglite' | 'sqlserver';
  readonly outbox: OutboxStore;
  readonly inbox: InboxStore;
  /** Applies pending migrations; safe when several processes migrate at once. */
  migrate(): Promise<MigrationReport>;
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
