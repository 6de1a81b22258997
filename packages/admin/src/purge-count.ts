/**
 * The dry run of a purge: what `AdminStore.purge` with the same table, state and age would delete, counted. Core's
 * `AdminStore` port does not declare it; the SQL stores' admin has `countPurge` where their dialect can count
 * (PostgreSQL and PGlite; not SQL Server yet), and {@link purgeCounterOf} finds it. An operator counts before
 * deleting dead rows, the only copy of messages that were never delivered (`queuebox purge --dry-run`).
 */
import type { AdminStore, PurgeOptions } from '@queuebox/core';

/** A store's admin that counts what a purge would delete. */
export interface PurgeCounter {
  /** How many rows `purge` calls with these options would delete, all batches together; deletes nothing. */
  countPurge(options: Omit<PurgeOptions, 'batchSize'>): Promise<number>;
}

/** `admin`'s purge count, or undefined when its store cannot count one. */
export function purgeCounterOf(admin: AdminStore): PurgeCounter | undefined {
  const candidate = admin as AdminStore & Partial<PurgeCounter>;
  return typeof candidate.countPurge === 'function' ? (candidate as PurgeCounter) : undefined;
}
