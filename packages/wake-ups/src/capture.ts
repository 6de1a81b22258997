import type { WakeTarget } from './channels.ts';

/** Where a capture gets its notifications from. */
export type CaptureKind = 'postgres' | 'pglite' | 'none';

/**
 * A running wake-up source. It only cuts latency: the drains poll whether or not it listens, so a capture that
 * is down, reconnecting or missing (SQL Server) changes when rows are delivered, never whether.
 */
export interface Capture {
  readonly kind: CaptureKind;
  /**
   * Starts listening. Resolves `true` once LISTEN is in place, `false` when the first attempt failed (a
   * PostgreSQL capture keeps trying in the background until `close()`) or when there is nothing to listen to.
   * Never rejects. Calling it again answers the first call's promise.
   */
  start(): Promise<boolean>;
  /** Whether notifications can arrive right now. */
  readonly listening: boolean;
  /** Stops listening and releases the connection; safe to call more than once. */
  close(): Promise<void>;
  /**
   * Whether this capture should hold `target`'s wake-up lock (PostgreSQL only; migrations 0011 and 0012). False lets
   * go of it at once and keeps the capture from taking it again: the inserts then notify nobody (unless another
   * listener holds it), and their commits no longer wait for one another. True takes it again without waiting, and
   * keeps trying every `lockRetryMs` while it cannot (an insert that notified nobody has not ended yet, or another
   * listener holds it); a later take wakes both drains. Resolves whether the lock is held now.
   */
  want?(target: WakeTarget, wanted: boolean): Promise<boolean>;
  /**
   * How many transactions wait right now for PostgreSQL's notification lock (server-wide: a transaction that sent a
   * notification takes it before its commit and holds it across the WAL flush), 0 while not connected. PostgreSQL
   * only.
   */
  waitingCommits?(): Promise<number>;
  /**
   * Rows inserted into the schema's outbox so far, by the server's statistics (`pg_stat_user_tables.n_tup_ins`: each
   * session reports at most once a second, so a reading lags by about that), or undefined when it cannot tell (not
   * connected, no statistics). PostgreSQL only.
   */
  outboxInserts?(): Promise<number | undefined>;
}

/**
 * The capture of a database without notifications (SQL Server): `start()` answers false, and the drains rely on
 * their poll intervals and the in-process wake-ups alone.
 */
export function createNoCapture(): Capture {
  return {
    kind: 'none',
    start: () => Promise.resolve(false),
    listening: false,
    close: () => Promise.resolve(),
  };
}
