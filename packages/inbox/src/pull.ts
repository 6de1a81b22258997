import type { InboxRow, InboxStore, RowClaim, RowId, SettleReport } from '@queuebox/core';
import { QueueBoxError } from '@queuebox/core';

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
 * Longest lease of a claim and longest delay of a retry, in ms: about 68 years (SQL Server's DATEADD takes whole
 * seconds in an INT; the client's `MAX_DELAY_MS` for enqueue's delay is the same).
 */
export const MAX_PULL_DELAY_MS = 2_147_483_647_000;

/** Claims one `claim` call runs at most while every row it claimed was given up (see `claim`). */
const MAX_CLAIM_ROUNDS = 10;

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
   * in last_error) and claims on. `n`: a whole number from 1 to {@link MAX_CLAIM_ROWS}; `leaseMs`: more than 0, at
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

/** `value` as the argument text of an error message. */
function shown(value: unknown): string {
  return typeof value === 'number' || typeof value === 'bigint' ? String(value) : typeof value;
}

/** The last_error of a row the worker gave up on at claim time. */
function noAttemptLeft(row: InboxRow): string {
  return (
    `no attempt remains (attempt ${row.attempt}, max_attempts ${row.maxAttempts}): the pull worker gave up on ` +
    'the row without handling it again; a claim whose lease expires unsettled (the worker crashed, was killed ' +
    'or stalled on the row) counts an attempt'
  );
}

/** Creates a pull worker for one source. */
export function createPullWorker(deps: PullWorkerDeps): PullWorker {
  const { store, source } = deps;

  function fenced(report: SettleReport, id: RowId, operation: string): void {
    if (!report.settled.some((s) => s.id === id)) throw new ClaimLostError(id, source, operation);
  }

  function claimOf(row: RowClaim): RowClaim {
    return { id: row.id, claimToken: row.claimToken };
  }

  /** The row's attempts under this claim: from the row when it carries them, else read (and fenced) from the store. */
  async function attemptsOf(row: RetryRow): Promise<{ attempt: number; maxAttempts: number }> {
    const { attempt, maxAttempts } = row;
    if (Number.isInteger(attempt) && Number.isInteger(maxAttempts))
      return { attempt: attempt as number, maxAttempts: maxAttempts as number };
    const stored = await store.get(row.id);
    if (stored === undefined || stored.claimToken !== row.claimToken)
      throw new ClaimLostError(row.id, source, 'retry');
    return stored;
  }

  return {
    async claim(n, leaseMs) {
      if (!Number.isInteger(n) || n < 1 || n > MAX_CLAIM_ROWS)
        throw new RangeError(
          `claim(n, leaseMs): n must be a whole number of rows from 1 to ${MAX_CLAIM_ROWS} (got ${shown(n)})`,
        );
      if (typeof leaseMs !== 'number' || !(leaseMs > 0) || leaseMs > MAX_PULL_DELAY_MS)
        throw new RangeError(
          `claim(n, leaseMs): leaseMs must be more than 0 and at most ${MAX_PULL_DELAY_MS} milliseconds (got ${shown(leaseMs)})`,
        );
      for (let round = 1; ; round += 1) {
        const rows = (
          await store.claim({ sources: [source], batchSize: n, leaseMs, takeOverExpired: true })
        ).filter((r): r is ClaimedInboxRow => r.claimToken !== null);
        const spent = rows.filter((r) => r.attempt >= r.maxAttempts);
        if (spent.length === 0) return rows;
        const live = rows.filter((r) => r.attempt < r.maxAttempts);
        try {
          await store.markDead(spent.map((r) => ({ ...claimOf(r), reason: noAttemptLeft(r) })));
        } catch (error) {
          // The spent rows stay claimed until their lease expires, and are given up at their next takeover.
          if (live.length === 0) throw error;
        }
        // Only spent rows: claim again, so a row given up does not cost the caller a poll interval.
        if (live.length > 0 || round >= MAX_CLAIM_ROUNDS) return live;
      }
    },
    async markProcessed(row) {
      fenced(await store.markProcessed([claimOf(row)]), row.id, 'markProcessed');
    },
    async retry(row, delayMs, error) {
      if (typeof delayMs !== 'number' || !(delayMs >= 0) || delayMs > MAX_PULL_DELAY_MS)
        throw new RangeError(
          `retry(row, delayMs, error): delayMs must be from 0 to ${MAX_PULL_DELAY_MS} milliseconds (got ${shown(delayMs)})`,
        );
      if (typeof error !== 'string')
        throw new TypeError(`retry(row, delayMs, error): error must be a string (got ${shown(error)})`);
      const { attempt, maxAttempts } = await attemptsOf(row);
      if (attempt + 1 >= maxAttempts) {
        // No attempt remains after this failed one: the worker gives up (processing → dead), as the outbox does.
        fenced(await store.markDead([{ ...claimOf(row), reason: error }]), row.id, 'retry');
        return 'dead';
      }
      fenced(await store.retry([{ ...claimOf(row), delayMs, error }]), row.id, 'retry');
      return 'pending';
    },
    async markDead(row, reason) {
      fenced(await store.markDead([{ ...claimOf(row), reason }]), row.id, 'markDead');
    },
  };
}
