import {
  type ClaimedInboxRow,
  ClaimLostError,
  describeValue,
  type InboxRow,
  MAX_CLAIM_ROWS,
  MAX_GIVEN_UP_PER_CLAIM,
  MAX_PULL_DELAY_MS,
  type PullWorker,
  type PullWorkerDeps,
  type RetryOutcome,
  type RetryRow,
  type RowClaim,
  type RowId,
  type SettleReport,
} from '@queuebox/core';

// The pull worker's API lives in core (the client re-exports it without loading this package); it is re-exported
// here, where it always was.
export {
  type ClaimedInboxRow,
  ClaimLostError,
  MAX_CLAIM_ROWS,
  MAX_GIVEN_UP_PER_CLAIM,
  MAX_PULL_DELAY_MS,
  type PullWorker,
  type PullWorkerDeps,
  type RetryOutcome,
  type RetryRow,
};

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

  /**
   * The claim of `row` for a settle. An id or a claim token that is not a string (a number, missing) is the
   * caller's mistake, refused with a `TypeError` naming it rather than reported as a lost claim (`ClaimLostError`),
   * alike on both stores (an outside audit: PostgreSQL's store threw its own TypeError from deep inside, SQL
   * Server's a lost claim).
   */
  function claimOf(row: RowClaim, call: string): RowClaim {
    const id: unknown = row?.id;
    if (typeof id !== 'string')
      throw new TypeError(
        `${call}: row.id must be the row's id as the claim answered it, a decimal string such as "42" (got ${describeValue(id)})`,
      );
    const claimToken: unknown = row.claimToken;
    if (typeof claimToken !== 'string')
      throw new TypeError(
        `${call}: row.claimToken must be the claim token the claim answered, a string (got ${describeValue(claimToken)})`,
      );
    return { id: row.id, claimToken: row.claimToken };
  }

  /** The row's attempts under this claim: from the row when it carries them, else read (and fenced) from the store. */
  async function attemptsOf(row: RetryRow): Promise<{ attempt: number; maxAttempts: number }> {
    const { attempt, maxAttempts } = row;
    if (Number.isInteger(attempt) && Number.isInteger(maxAttempts))
      return { attempt: attempt as number, maxAttempts: maxAttempts as number };
    const stored = await store.get(row.id);
    // Tokens are UUIDs, compared without regard to letter case as every settle's SQL compares them.
    if (
      stored?.claimToken == null ||
      typeof row.claimToken !== 'string' ||
      stored.claimToken.toLowerCase() !== row.claimToken.toLowerCase()
    )
      throw new ClaimLostError(row.id, source, 'retry');
    return stored;
  }

  return {
    async claim(n, leaseMs) {
      if (!Number.isInteger(n) || n < 1 || n > MAX_CLAIM_ROWS)
        throw new RangeError(
          `claim(n, leaseMs): n must be a whole number of rows from 1 to ${MAX_CLAIM_ROWS} (got ${describeValue(n)})`,
        );
      if (typeof leaseMs !== 'number' || !(leaseMs > 0) || leaseMs > MAX_PULL_DELAY_MS)
        throw new RangeError(
          `claim(n, leaseMs): leaseMs must be more than 0 and at most ${MAX_PULL_DELAY_MS} milliseconds (got ${describeValue(leaseMs)})`,
        );
      for (let givenUp = 0; ; ) {
        const rows = (
          await store.claim({ sources: [source], batchSize: n, leaseMs, takeOverExpired: true })
        ).filter((r): r is ClaimedInboxRow => r.claimToken !== null);
        const spent = rows.filter((r) => r.attempt >= r.maxAttempts);
        if (spent.length === 0) return rows;
        const live = rows.filter((r) => r.attempt < r.maxAttempts);
        try {
          await store.markDead(
            spent.map((r) => ({ ...claimOf(r, 'claim(n, leaseMs)'), reason: noAttemptLeft(r) })),
          );
        } catch (error) {
          // The spent rows stay claimed until their lease expires, and are given up at their next takeover.
          if (live.length === 0) throw error;
        }
        givenUp += spent.length;
        // Only spent rows: claim again, so a row given up does not cost the caller a poll interval.
        if (live.length > 0 || givenUp >= MAX_GIVEN_UP_PER_CLAIM) return live;
      }
    },
    async markProcessed(row) {
      fenced(await store.markProcessed([claimOf(row, 'markProcessed(row)')]), row.id, 'markProcessed');
    },
    async retry(row, delayMs, error) {
      if (typeof delayMs !== 'number' || !(delayMs >= 0) || delayMs > MAX_PULL_DELAY_MS)
        throw new RangeError(
          `retry(row, delayMs, error): delayMs must be from 0 to ${MAX_PULL_DELAY_MS} milliseconds (got ${describeValue(delayMs)})`,
        );
      if (typeof error !== 'string')
        throw new TypeError(
          `retry(row, delayMs, error): error must be a string (got ${describeValue(error)})`,
        );
      const claim = claimOf(row, 'retry(row, delayMs, error)');
      const { attempt, maxAttempts } = await attemptsOf(row);
      if (attempt + 1 >= maxAttempts) {
        // No attempt remains after this failed one: the worker gives up (processing → dead), as the outbox does,
        // counting the try it just made.
        fenced(await store.markDead([{ ...claim, reason: error, attempted: true }]), row.id, 'retry');
        return 'dead';
      }
      fenced(await store.retry([{ ...claim, delayMs, error }]), row.id, 'retry');
      return 'pending';
    },
    async markDead(row, reason) {
      if (typeof reason !== 'string')
        throw new TypeError(
          `markDead(row, reason): reason must be a string (got ${describeValue(reason)}; for an error, pass String(error) or error.message)`,
        );
      fenced(
        await store.markDead([{ ...claimOf(row, 'markDead(row, reason)'), reason }]),
        row.id,
        'markDead',
      );
    },
  };
}
