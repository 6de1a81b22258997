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

/** Dependencies of a pull worker. */
export interface PullWorkerDeps {
  readonly store: InboxStore;
  /** The pull source whose rows the worker claims. */
  readonly source: string;
}

/**
 * The pull API over one source: the seed's inbox state table and nothing else. Every settle is fenced by the claim
 * token and throws ClaimLostError when the claim is no longer the row's current one.
 */
export interface PullWorker {
  /**
   * pending → processing for up to `n` due rows, and takeover of rows whose lease expired (processing →
   * processing with a new claim token, counting an attempt). The claim holds the rows for `leaseMs`.
   */
  claim(n: number, leaseMs: number): Promise<ClaimedInboxRow[]>;
  /** processing → processed: the work is done. */
  markProcessed(row: RowClaim): Promise<void>;
  /** processing → pending, due after `delayMs`, counting an attempt; `error` is kept as last_error. */
  retry(row: RowClaim, delayMs: number, error: string): Promise<void>;
  /** processing → dead with `reason`. */
  markDead(row: RowClaim, reason: string): Promise<void>;
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

  return {
    async claim(n, leaseMs) {
      if (!Number.isInteger(n) || n < 1)
        throw new RangeError('claim(n) needs a positive whole number of rows');
      if (!(leaseMs > 0)) throw new RangeError('claim(n, leaseMs) needs a positive lease');
      const rows = await store.claim({ sources: [source], batchSize: n, leaseMs, takeOverExpired: true });
      return rows.filter((r): r is ClaimedInboxRow => r.claimToken !== null);
    },
    async markProcessed(row) {
      fenced(await store.markProcessed([claimOf(row)]), row.id, 'markProcessed');
    },
    async retry(row, delayMs, error) {
      if (!(delayMs >= 0)) throw new RangeError('retry needs a delay of zero or more milliseconds');
      fenced(await store.retry([{ ...claimOf(row), delayMs, error }]), row.id, 'retry');
    },
    async markDead(row, reason) {
      fenced(await store.markDead([{ ...claimOf(row), reason }]), row.id, 'markDead');
    },
  };
}
