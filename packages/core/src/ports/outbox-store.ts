import type { NewOutboxMessage, OutboxRow, RowClaim, RowId } from '../messages.ts';
import type { ClaimOptions, ReclaimReport, SettleReport } from './claims.ts';

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

/** A claim given back untried (`OutboxStore.release`). */
export interface OutboxReleaseItem extends RowClaim {
  /** When it is due again, in milliseconds from now. Default 0. */
  readonly delayMs?: number;
}

/** Outbox failure that no retry can fix (no route, no publisher, transform rejected), or the attempt that reached a lower maxAttempts. */
export interface OutboxDeadItem extends RowClaim {
  readonly reason: string;
  readonly destination?: string | null;
  /** Whether a delivery was attempted (counts one attempt). Default false. */
  readonly attempted?: boolean;
  /**
   * A lower max_attempts written to the row as it goes dead (never a higher one): a destination's `maxAttempts`
   * lowers the max_attempts of the rows routed to it, so the row goes dead when its attempt reaches its own
   * max_attempts, as the specification's outbox path says. Default: the row's is kept.
   */
  readonly maxAttempts?: number;
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
   * never claimed. The outbox of a `Store` answers `ClaimedOutboxRow`s: each row with the message id its
   * deliveries carry (`withMessageIds`).
   */
  claim(options: ClaimOptions): Promise<OutboxRow[]>;
  /** processing → sent. */
  markSent(items: readonly OutboxSentItem[]): Promise<SettleReport<'Sent'>>;
  /** Counts an attempt; processing → pending at now + delay, or → dead when no attempt remains. */
  retry(items: readonly OutboxRetryItem[]): Promise<SettleReport<'Pending' | 'Dead'>>;
  /** processing → dead with a reason. */
  markDead(items: readonly OutboxDeadItem[]): Promise<SettleReport<'Dead'>>;
  /**
   * processing → pending without counting an attempt (work given back before it was tried, e.g. at shutdown), due
   * `delayMs` from now (default 0: behind the rows due before it).
   */
  release(items: readonly OutboxReleaseItem[]): Promise<SettleReport<'Pending'>>;
  /** Expired claims: processing → pending counting the attempt they used, or → dead when none remains. */
  reclaimExpired(limit?: number): Promise<ReclaimReport>;
  /** One row by id, or undefined. */
  get(id: RowId): Promise<OutboxRow | undefined>;
}
