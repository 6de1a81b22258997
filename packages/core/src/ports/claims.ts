import type { RowId } from '../messages.ts';

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
