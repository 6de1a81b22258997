import { QueueBoxError } from './errors.ts';
import type { InboxRow, RowClaim, RowId } from './messages.ts';
import type { InboxStore } from './ports/inbox-store.ts';

// The pull worker's API: @queuebox/inbox implements it (`createPullWorker`), @queuebox/client opens it over a
// connection URL. Both re-export these, so the client's published declarations need nothing of the inbox's.

/**
 * The claim on a row was lost: its lease expired and the row was taken over (or returned by a reclaim) before
 * this settle. The worker must not act as the row's owner any more; the row's new owner will settle it.
 */
export class ClaimLostError extends QueueBoxError {
  readonly id: RowId;
  readonly source: string;

  constructor(id: RowId, source: string, operation: string) {
    super(`The claim on inbox row ${id} of ${source} was lost before ${operation}`, {
      context: { id, source, operation },
    });
    this.id = id;
    this.source = source;
  }
}

/** A row claimed by a pull worker: the claim token is always set. */
export type ClaimedInboxRow = InboxRow & { readonly claimToken: string };

/**
 * What `retry` takes: the claimed row. With its `attempt` and `maxAttempts` (a `ClaimedInboxRow` has both) the
 * worker decides pending or dead from them; with only `{ id, claimToken }` it reads them from the database first.
 */
export type RetryRow = RowClaim & { readonly attempt?: number; readonly maxAttempts?: number };

/** What `retry` did: `pending` (retried after the delay) or `dead` (no attempt remained: the worker gave up). */
export type RetryOutcome = 'pending' | 'dead';

/** Most rows one `claim` may ask for (the relay's and the outbox's `batchSize` limit too). */
export const MAX_CLAIM_ROWS = 1000;

/**
 * Most rows one `claim` call gives up (rows whose attempts are used up) while it claims on for a row to answer. An
 * expired row is taken over alone, so each claim again gives up at most one: a bound in rounds answered `[]` while
 * due rows waited behind a crashed worker's spent rows (10 rounds did, with 12 of them), and a worker reads `[]` as
 * idle.
 */
export const MAX_GIVEN_UP_PER_CLAIM = 1000;

/**
 * Longest lease of a claim and longest delay of a retry, in ms: about 68 years (SQL Server's DATEADD takes whole
 * seconds in an INT; the client's `MAX_DELAY_MS` for enqueue's delay is the same).
 */
export const MAX_PULL_DELAY_MS = 2_147_483_647_000;

/** Dependencies of a pull worker. */
export interface PullWorkerDeps {
  readonly store: InboxStore;
  /** The pull source whose rows the worker claims. */
  readonly source: string;
}

/**
 * The pull API over one source: the seed's inbox state table and nothing else. Every settle is fenced by the claim
 * token and throws ClaimLostError when the claim is no longer the row's current one.
 *
 * Attempts: `row.attempt` counts the tries of the row that failed before this claim — a `retry`, and a claim whose
 * lease expired unsettled (its worker crashed, was killed or stalled). The row has `maxAttempts` tries in all: a
 * `retry` that uses the last one sends the row dead, and a claim never hands out a row with none left.
 */
export interface PullWorker {
  /**
   * Up to `n` rows, held for `leaseMs`: pending → processing for due rows, oldest first. A row whose lease expired
   * is taken over first (processing → processing with a new claim token, counting an attempt) and alone: such a
   * claim answers only that row, so a row that crashed its worker is retried by itself and the other rows of the
   * crashed batch each on their own. A row whose attempts are all used up (`attempt >= maxAttempts`, as after
   * repeated crashes on it) is never answered: the worker gives up on it (processing → dead, `no attempt remains …`
   * in last_error) and claims on, up to {@link MAX_GIVEN_UP_PER_CLAIM} rows given up in one call. `n`: a whole number from 1 to {@link MAX_CLAIM_ROWS}; `leaseMs`: more than 0, at
   * most {@link MAX_PULL_DELAY_MS}; otherwise a RangeError before any statement.
   */
  claim(n: number, leaseMs: number): Promise<ClaimedInboxRow[]>;
  /** processing → processed: the work is done. */
  markProcessed(row: RowClaim): Promise<void>;
  /**
   * A failed try, counting an attempt, `error` kept as last_error: processing → pending, due after `delayMs`, while
   * an attempt remains (`'pending'`); processing → dead when this was the last one (`row.attempt + 1 >=
   * row.maxAttempts`: the worker gives up; `'dead'`). `delayMs`: 0 to {@link MAX_PULL_DELAY_MS}, else a
   * RangeError before any statement.
   */
  retry(row: RetryRow, delayMs: number, error: string): Promise<RetryOutcome>;
  /** processing → dead with `reason`. */
  markDead(row: RowClaim, reason: string): Promise<void>;
}
