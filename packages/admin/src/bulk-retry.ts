/**
 * One batch of a bulk admin run (a requeue by filter), tried again when the database ended it for a conflict with
 * another transaction (core's `isTransientConflict`: a deadlock, a serialization failure, SQL Server's deadlock
 * victim or lock timeout). Such a batch rolled back whole, so running it again is safe, and it usually goes through a
 * moment later. Before, the first conflict ended the run: the CLI exited 1 without the count of rows already
 * requeued, and `POST /admin/outbox/requeue` answered 503 "The database is unavailable" (an outside audit: about 10
 * of 33 bulk requeues of 20,000 rows while the runtime delivered; on AWS each counted toward the AdminFailures alarm).
 */
import { isTransientConflict, QueueBoxError } from '@queuebox/core';

/** Tries of one batch, the first included, before a run gives up on transient conflicts. */
export const BULK_BATCH_TRIES = 4;

/** Pause before the second try, in milliseconds; it doubles before each further one (100, 200, 400 ms). */
export const BULK_RETRY_PAUSE_MS = 100;

/** Options of {@link retryTransientConflicts}. */
export interface BulkRetryOptions {
  /** Default {@link BULK_BATCH_TRIES}. */
  readonly tries?: number;
  /** Default {@link BULK_RETRY_PAUSE_MS}. */
  readonly pauseMs?: number;
  /** Waits `ms`. Default a timer. */
  readonly sleep?: (ms: number) => Promise<void>;
}

/**
 * The error of a batch whose every try the database ended for a transient conflict: `tries` of them. Its cause is
 * the last conflict. A caller answers it as what it is (a conflict that outlasted the retries, with what the run did
 * before), never as "the database is unavailable".
 */
export class BulkConflictError extends QueueBoxError {
  readonly tries: number;

  constructor(tries: number, cause: unknown) {
    super(`The database ended the batch ${tries} times for a conflict with other transactions`, {
      cause,
      context: { tries },
    });
    this.tries = tries;
  }
}

const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `batch`; when it fails for a transient conflict, runs it again after a short pause, at most `tries` times in
 * all, then throws a {@link BulkConflictError}. Any other error is thrown at once, as it is.
 */
export async function retryTransientConflicts<T>(
  batch: () => Promise<T>,
  options: BulkRetryOptions = {},
): Promise<T> {
  const tries = Math.max(1, options.tries ?? BULK_BATCH_TRIES);
  const pauseMs = options.pauseMs ?? BULK_RETRY_PAUSE_MS;
  const sleep = options.sleep ?? wait;
  for (let attempt = 1; ; attempt++) {
    try {
      return await batch();
    } catch (error) {
      if (!isTransientConflict(error)) throw error;
      if (attempt >= tries) throw new BulkConflictError(tries, error);
      await sleep(pauseMs * 2 ** (attempt - 1));
    }
  }
}

/**
 * The words of a bulk requeue that stopped at a batch the database kept ending for a conflict: what it did before,
 * and what to do (run it again: it goes on with the rows still dead).
 */
export function requeueConflictMessage(table: 'outbox' | 'inbox', tries: number, requeued: number): string {
  return `The database ended a requeue batch ${tries} times for a conflict with other transactions (a deadlock or serialization failure, e.g. with deliveries under way), so the run stopped there; ${requeued} dead ${table} row${requeued === 1 ? ' was' : 's were'} requeued before it. The database is available: run the requeue again, it goes on with the rows still dead`;
}
