import { type AdminStore, type Clock, systemClock, type Table } from '@queuebox/core';

/** What retention deletes, and how fast. */
export interface RetentionPolicy {
  /** Delete sent outbox and processed inbox rows older than this (by updated_at); 0 keeps them. */
  readonly keepSentMs: number;
  /** Delete dead rows older than this; 0 keeps them. */
  readonly keepDeadMs: number;
  /** Rows per delete statement. */
  readonly batchSize: number;
}

/** Options of {@link runRetention}. */
export interface RetentionOptions extends RetentionPolicy {
  /** Start no batch at or after this time (epoch ms of `clock`), e.g. the tick's drain deadline. */
  readonly deadline: number;
  /** Default the system clock. */
  readonly clock?: Clock;
  /** Called after every batch, e.g. for a log line or progress. */
  readonly onBatch?: (batch: RetentionBatch) => void;
}

/** One purge batch of a retention run. */
export interface RetentionBatch {
  readonly table: Table;
  readonly state: 'Sent' | 'Dead';
  readonly deleted: number;
}

/** What a retention run deleted. */
export interface RetentionReport {
  readonly deleted: {
    readonly outbox: { readonly sent: number; readonly dead: number };
    readonly inbox: { readonly processed: number; readonly dead: number };
  };
  /** Rows deleted in all. */
  readonly total: number;
  readonly batches: number;
  /** True when every kind ran out of old rows; false when the deadline came first (the next run goes on). */
  readonly complete: boolean;
  /**
   * The kinds not done when the deadline came: their last batch came back full, or they had no turn yet (old rows
   * may be left of each); empty when `complete`. How many are left is not counted: that would read the very rows
   * retention has not deleted yet.
   */
  readonly unfinished: readonly { readonly table: Table; readonly state: 'Sent' | 'Dead' }[];
}

/** The configuration's `retention` section, in hours as the schema has it. */
export interface RetentionConfig {
  readonly keepSentHours: number;
  readonly keepDeadHours: number;
  readonly batchSize: number;
}

const HOUR_MS = 3_600_000;

/** The policy of the configuration's `retention` section (`keepSentHours`, `keepDeadHours`, `batchSize`). */
export function retentionPolicyOf(config: RetentionConfig): RetentionPolicy {
  return {
    keepSentMs: config.keepSentHours * HOUR_MS,
    keepDeadMs: config.keepDeadHours * HOUR_MS,
    batchSize: config.batchSize,
  };
}

/**
 * Deletes finished rows past their age (docs/design.md §6 Retention): sent/processed rows older than `keepSentMs`, dead
 * rows older than `keepDeadMs`, on both tables, one bounded batch per statement. It goes round the four kinds
 * one batch each, so a large backlog of one kind does not starve the others, until every kind deletes fewer
 * than `batchSize` (done) or `deadline` has come (the next run picks up where this one stopped). An age of 0
 * skips that kind. A failing batch rejects with the store's error; batches already deleted stay deleted.
 *
 * Note for the inbox: once a processed row is deleted, a sender that repeats its idempotency key is accepted
 * again as new, so keep processed rows longer than any sender retries.
 */
export async function runRetention(admin: AdminStore, options: RetentionOptions): Promise<RetentionReport> {
  const clock = options.clock ?? systemClock;
  const deleted = { outbox: { sent: 0, dead: 0 }, inbox: { processed: 0, dead: 0 } };
  const kinds: { table: Table; state: 'Sent' | 'Dead'; olderThanMs: number; add: (n: number) => void }[] = [];
  if (options.keepSentMs > 0) {
    kinds.push(
      {
        table: 'outbox',
        state: 'Sent',
        olderThanMs: options.keepSentMs,
        add: (n) => (deleted.outbox.sent += n),
      },
      {
        table: 'inbox',
        state: 'Sent',
        olderThanMs: options.keepSentMs,
        add: (n) => (deleted.inbox.processed += n),
      },
    );
  }
  if (options.keepDeadMs > 0) {
    kinds.push(
      {
        table: 'outbox',
        state: 'Dead',
        olderThanMs: options.keepDeadMs,
        add: (n) => (deleted.outbox.dead += n),
      },
      {
        table: 'inbox',
        state: 'Dead',
        olderThanMs: options.keepDeadMs,
        add: (n) => (deleted.inbox.dead += n),
      },
    );
  }
  const batchSize = Math.max(1, Math.floor(options.batchSize));
  let batches = 0;
  let total = 0;
  let active = kinds;
  while (active.length > 0 && clock.now() < options.deadline) {
    const next: typeof kinds = [];
    for (const kind of active) {
      if (clock.now() >= options.deadline) {
        next.push(kind);
        continue;
      }
      const n = await admin.purge({
        table: kind.table,
        state: kind.state,
        olderThanMs: kind.olderThanMs,
        batchSize,
      });
      batches += 1;
      total += n;
      kind.add(n);
      options.onBatch?.({ table: kind.table, state: kind.state, deleted: n });
      if (n >= batchSize) next.push(kind);
    }
    active = next;
  }
  return {
    deleted,
    total,
    batches,
    complete: active.length === 0,
    unfinished: active.map(({ table, state }) => ({ table, state })),
  };
}
