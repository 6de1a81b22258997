import type { InboxRow, JsonValue, NewInboxMessage, NewOutboxMessage, RowClaim, RowId } from '../messages.ts';
import type { ClaimOptions, ReclaimReport, SettleReport } from './claims.ts';

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
  /**
   * Whether the claim was a try that failed (counts one attempt), as a pull worker's `retry` that gives up after
   * its last attempt says. Default false.
   */
  readonly attempted?: boolean;
}

/**
 * An inbox row as the relay claims it (`claimForRelay`): every column but the payload, which the relay never reads
 * (it runs no transform) and which `forward` copies inside the database. A row with its payload (`claim`) is one too.
 */
export type RelayInboxRow = Omit<InboxRow, 'payload'> & { readonly payload?: JsonValue };

/**
 * The outbox row the relay's forward writes. Without `payload` (undefined, not JSON `null`) its payload is the
 * stored payload of the inbox row it forwards, copied by the database, so it never travels back and forth.
 */
export type ForwardMessage = Omit<NewOutboxMessage, 'payload'> & { readonly payload?: JsonValue };

/** The relay's forward: the outbox row to write for a claimed inbox row. */
export interface ForwardItem extends RowClaim {
  readonly outbox: ForwardMessage;
}

/**
 * What the relay's claim answers (`claimForRelay`, and `claimed` of `forwardAndClaim`): the rows it claimed, in id
 * order, and in `blocked` how many due rows it looked at and left pending because an earlier row of their source and
 * aggregate id is pending or processing outside its batch (another relay holds it, its claim is not committed yet,
 * or a crashed relay's lease still runs), not counting rows that wait only for such a row to become due. Absent
 * when none (and from a store that does not keep that order). A relay whose claim took nothing but left rows
 * blocked claims again a little later instead of ending its drain: the row they wait for may be forwarded by a
 * relay that can no longer see them.
 */
export type RelayClaimedRows = RelayInboxRow[] & {
  readonly blocked?: number;
  /**
   * The rows that hold its blocked rows back, one per source and aggregate id (at most
   * {@link MAX_SKIPPED_AGGREGATES}): for each id with a row counted in `blocked`, its earlier row that is pending or
   * processing outside the batch; and for each id the claim skipped (`skipAggregatesOf`) whose oldest active row is
   * still processing, that row. The relay passes them as `skipAggregatesOf` to its next claim. Absent when none
   * (and from a store that does not keep that order).
   */
  readonly blockedBy?: readonly RowId[];
};

/**
 * Most rows a relay claim's `skipAggregatesOf` names, and its answer's `blockedBy`: 1000, the largest relay batch
 * (`inbox.relay.batchSize`), so the ids one crashed relay holds are all skipped whatever its batch size (at 100, a
 * crashed batch of 150 left the other ids waiting for its lease). Each skipped id costs the claim one primary-key
 * read and one index probe: on PostgreSQL 15 (2 cores) a claim skipping 1000 held ids with 2,000 of their rows
 * ahead took about 15 ms, one skipping 100 about 4.5 ms, a plain claim about 3 ms (docs/design.md §5). The ids
 * travel as one parameter (a bigint array on PostgreSQL, one JSON text on SQL Server), so the statement's text and
 * its parameter count do not grow with them.
 */
export const MAX_SKIPPED_AGGREGATES = 1000;

/**
 * Most due rows per source a relay claim that skips aggregate ids reads to find its window. It reads the skipped ids'
 * rows to get past them (no index orders the due rows without them), so this bounds what such a claim costs (on
 * PostgreSQL 15, 2 cores: 56–82 ms with 100,000 rows of a held id ahead, docs/design.md §5): when more rows of held
 * ids than this wait ahead of the others', the others wait for the held ids' lease, as they did before ids were
 * skipped.
 */
export const MAX_SKIP_SCAN_ROWS = 100_000;

/** Options of the relay's claim (`claimForRelay`, and the claim of `forwardAndClaim`). */
export interface RelayClaimOptions extends Omit<InboxClaimOptions, 'takeOverExpired'> {
  /**
   * Rows whose source and aggregate id the claim skips: it does not read their ids' due rows into its window, so a
   * window that the later rows of held ids would fill reaches the other ids' rows (a crashed relay's rows stay
   * processing until their lease expires). Rows without an aggregate id are never skipped. The relay passes the
   * `blockedBy` of its previous claim's answer; empty or absent, the claim is the plain one. At most
   * {@link MAX_SKIPPED_AGGREGATES} are read.
   */
  readonly skipAggregatesOf?: readonly RowId[];
}

/** What a forward did (`forward`, and `forwarded` of `forwardAndClaim`). */
export type ForwardReport = SettleReport<'Sent'> & {
  /** The outbox rows written, in id order. */
  readonly outboxIds: readonly RowId[];
  /**
   * How long the forward waited for outbox key locks that other transactions held, in milliseconds: an application
   * transaction that enqueued a row of one of its keys and had not committed yet. Absent when it did not wait (or
   * the store does not measure it: SQL Server's does not).
   */
  readonly keyWaitMs?: number;
};

/** What `forwardAndClaim` did: the forward's report, then the rows it claimed (and the rows it left blocked). */
export interface ForwardAndClaimReport {
  readonly forwarded: ForwardReport;
  readonly claimed: RelayClaimedRows;
}

/** The inbox table. */
export interface InboxStore {
  /** (store) → pending, or `duplicate` when (source, idempotency key) exists; answered by the unique index. */
  store(message: NewInboxMessage): Promise<StoreResult>;
  /** (store) → dead with a reason (an AMQP message that is not JSON or that the transform rejected). */
  storeDead(message: NewInboxMessage, reason: string): Promise<StoreResult>;
  /** pending → processing for due rows of the given sources (and takeover of expired claims when asked). */
  claim(options: InboxClaimOptions): Promise<InboxRow[]>;
  /**
   * The relay's claim: the transition of `claim` without takeover (pending → processing, oldest first), answered
   * without their payload (see RelayInboxRow), in the order of each aggregate id: a row with an aggregate id is
   * claimed only when every earlier row of its source and aggregate id that is pending or processing is claimed
   * with it (several rows of one id go together, in id order), and the oldest active row of an aggregate id is
   * claimed when it is pending and due even if it sorts after later rows of its id (a requeued row). Rows left
   * pending for that are counted in `blocked` (see RelayClaimedRows). Rows without an aggregate id are claimed as
   * by `claim`. The ids of `skipAggregatesOf` are passed over (RelayClaimOptions): their rows are not claimed by this
   * call, and the rule above guards every row it claims all the same.
   */
  claimForRelay(options: RelayClaimOptions): Promise<RelayClaimedRows>;
  /** processing → processed. */
  markProcessed(items: readonly RowClaim[]): Promise<SettleReport<'Sent'>>;
  /** Counts an attempt; processing → pending at now + delay. */
  retry(items: readonly InboxRetryItem[]): Promise<SettleReport<'Pending'>>;
  /** processing → dead. */
  markDead(items: readonly InboxDeadItem[]): Promise<SettleReport<'Dead'>>;
  /**
   * For each item, in one transaction: the outbox row is inserted and the inbox row goes processing → processed.
   * An item whose claim is stale writes no outbox row. An item without `outbox.payload` gets the inbox row's stored
   * payload.
   */
  forward(items: readonly ForwardItem[]): Promise<ForwardReport>;
  /**
   * The relay's step: `forward(items)`, then `claimForRelay(claim)` — the next batch, taken while this one is
   * forwarded, so a relay under a steady stream needs one round trip per batch instead of two. PostgreSQL runs both
   * in one statement (one transaction); a store may also claim right after the forward committed. A forward that
   * fails claims nothing. The rows' transitions are those of the two calls: pending → processing for the claimed,
   * processing → processed for the forwarded (never both for one row in one call). The rows it forwards do not
   * hold back the later rows of their aggregate ids: the claim may take the next row of an id whose row it forwards.
   */
  forwardAndClaim(items: readonly ForwardItem[], claim: RelayClaimOptions): Promise<ForwardAndClaimReport>;
  /** Expired claims of the given sources (the relay's): processing → pending, counting the attempt they used. */
  reclaimExpired(sources: readonly string[], limit?: number): Promise<ReclaimReport>;
  /** One row by id, or undefined. */
  get(id: RowId): Promise<InboxRow | undefined>;
}
