/**
 * When the outbox's wake-up listener steps aside under load, and when it comes back (migration 0012).
 *
 * PostgreSQL commits the transactions that sent a notification one after the other, server-wide, each across its WAL
 * flush (async.c, PreCommit_Notify). While a listener holds the outbox channel's wake-up lock, every transaction of
 * the application that enqueues sends one, so a busy application's commits wait in one line for each other: ten
 * connections that each insert a business row and enqueue committed 2,978 transactions/s while a listener held the
 * lock against 4,338 while none did (`bench/notify-commits.ts`), and a server whose commits take milliseconds (a
 * remote disk, Aurora) caps such an application at a few hundred a second. A wake-up is worth that line only while
 * the drain would otherwise sleep: under load the drain is busy claiming anyway.
 *
 * So, checked every `checkMs` (1 s):
 * - listening, and notifications arrived at `enterPerSecond` (500/s) or faster over the last check, or at
 *   `minPerSecond` (50/s) or faster while commits waited in that line in at least `busyShare` (half) of the samples
 *   taken every `sampleMs` (100 ms) while notifications arrive (`waitingCommits`: a server whose commits are slow
 *   caps the notifying commits below 500 a second, and the line is then full long before): let go of the lock
 *   (`want(false)`: inserts then notify nobody, and commit side by side) and wake the drain every `pollMs` (5 ms)
 *   instead. A row then waits at most `pollMs` for its claim.
 * - aside for at least `minAsideMs` (5 s), and the drain claimed fewer than `exitPerSecond` (250) rows a second, or
 *   than half the notifications a second that made it step aside, over the last check: take the lock back (`want(true)`) and stop the fast wake-ups. The take succeeds only once every
 *   transaction that notified nobody has ended (0012: such an insert keeps the lock shared until its transaction
 *   ends), so the claim woken right after it sees their rows, and every later insert notifies. While it cannot be
 *   taken yet, the capture tries again every second and wakes the drain when it does (the drain polls at its
 *   `pollIntervalMs` meanwhile).
 *
 * Notifications are counted per statement (the triggers are statement-level), rows per claim: an application that
 * inserts rows in large statements never makes the listener step aside. `minAsideMs` bounds the changes to one pair
 * per 5 s whatever the load does.
 */

/** Options of {@link createStepAside}. */
export interface StepAsideOptions {
  /** Takes (`true`) or lets go of (`false`) the outbox channel's wake-up lock; resolves whether it is held now. */
  readonly want: (wanted: boolean) => Promise<boolean>;
  /** Wakes the outbox drain: every `pollMs` while aside, and once when the lock was taken back. */
  readonly wake: () => void;
  /** Notifications a second that make the listener step aside. Default {@link STEP_ASIDE_DEFAULTS}. */
  readonly enterPerSecond?: number;
  /** Rows claimed a second under which it comes back. */
  readonly exitPerSecond?: number;
  /** The drain's wake-up interval while aside. */
  readonly pollMs?: number;
  /** Interval of the decision. */
  readonly checkMs?: number;
  /** Shortest time aside. */
  readonly minAsideMs?: number;
  /**
   * How many transactions wait right now for PostgreSQL's notification lock (the capture's `waitingCommits`), sampled
   * every `sampleMs` while notifications arrive. Absent: only the rate decides.
   */
  readonly waitingCommits?: () => Promise<number>;
  /**
   * Rows inserted into the outbox so far (`pg_stat_user_tables.n_tup_ins`, the capture's `outboxInserts`): read at
   * each check while aside, for the application's insert rate. Absent: the rows this drain settles stand in for it.
   */
  readonly outboxInserts?: () => Promise<number | undefined>;
  /** Interval of those samples. */
  readonly sampleMs?: number;
  /** Share of a check's samples that saw a commit waiting at or above which it steps aside (with `minPerSecond`). */
  readonly busyShare?: number;
  /** Fewest notifications a second for waiting commits to make it step aside. */
  readonly minPerSecond?: number;
  /**
   * Told of each change: the notifications (stepping aside) or rows claimed (coming back) a second that decided it,
   * and when stepping aside the share of samples that saw a commit waiting. Default: nothing.
   */
  readonly onChange?: (aside: boolean, perSecond: number, waitingShare?: number) => void;
  /** Told when taking or giving the lock failed (the capture reconnects by itself). Default: nothing. */
  readonly onError?: (error: unknown) => void;
  /** Monotonic milliseconds. Default `performance.now`. */
  readonly now?: () => number;
}

/** The defaults of {@link StepAsideOptions}. */
export const STEP_ASIDE_DEFAULTS = {
  enterPerSecond: 500,
  exitPerSecond: 250,
  pollMs: 5,
  checkMs: 1000,
  minAsideMs: 5000,
  sampleMs: 100,
  busyShare: 0.5,
  minPerSecond: 50,
} as const;

/** A running step-aside decision. */
export interface StepAside {
  /** One outbox notification arrived. */
  notified(): void;
  /** `rows` claimed rows were settled (told per batch: a drain under load runs for its whole budget). */
  claimed(rows: number): void;
  /** Whether the listener is aside now. */
  readonly aside: boolean;
  /** Stops deciding and stops the fast wake-ups; leaves the lock as it is (the capture's close ends it). */
  close(): void;
}

export function createStepAside(options: StepAsideOptions): StepAside {
  const enterPerSecond = options.enterPerSecond ?? STEP_ASIDE_DEFAULTS.enterPerSecond;
  const exitPerSecond = options.exitPerSecond ?? STEP_ASIDE_DEFAULTS.exitPerSecond;
  const pollMs = Math.max(1, options.pollMs ?? STEP_ASIDE_DEFAULTS.pollMs);
  const checkMs = Math.max(1, options.checkMs ?? STEP_ASIDE_DEFAULTS.checkMs);
  const minAsideMs = options.minAsideMs ?? STEP_ASIDE_DEFAULTS.minAsideMs;
  const sampleMs = Math.max(1, options.sampleMs ?? STEP_ASIDE_DEFAULTS.sampleMs);
  const busyShare = options.busyShare ?? STEP_ASIDE_DEFAULTS.busyShare;
  const minPerSecond = options.minPerSecond ?? STEP_ASIDE_DEFAULTS.minPerSecond;
  const now = options.now ?? (() => performance.now());
  let aside = false;
  let asideSince = 0;
  /** The notifications a second that made it step aside. */
  let enteredAt = 0;
  let notifications = 0;
  /** Notifications since the last sample of the waiting commits: none, no sample. */
  let sinceSample = 0;
  let samples = 0;
  let busySamples = 0;
  let sampling = false;
  let rows = 0;
  let windowStart = now();
  let deciding = false;
  let closed = false;
  let poll: ReturnType<typeof setInterval> | undefined;

  const tell = (to: boolean, perSecond: number, waitingShare?: number) => {
    try {
      options.onChange?.(to, perSecond, waitingShare);
    } catch {
      // A logging hook must not stop the decision.
    }
  };
  const failed = (error: unknown) => {
    try {
      options.onError?.(error);
    } catch {
      // As in tell().
    }
  };
  const wake = () => {
    try {
      options.wake();
    } catch {
      // The drains poll anyway.
    }
  };
  const stopPolling = () => {
    clearInterval(poll);
    poll = undefined;
  };

  const decide = async () => {
    const at = now();
    const seconds = Math.max(at - windowStart, 1) / 1000;
    const notified = notifications / seconds;
    const claimed = rows / seconds;
    const waitingShare = samples === 0 ? 0 : busySamples / samples;
    const heardAside = aside ? notifications : 0;
    notifications = 0;
    rows = 0;
    samples = 0;
    busySamples = 0;
    windowStart = at;
    if (!aside) {
      if (notified < enterPerSecond && (notified < minPerSecond || waitingShare < busyShare)) return;
      aside = true;
      asideSince = at;
      enteredAt = notified;
      poll = setInterval(wake, pollMs);
      poll.unref?.();
      tell(true, Math.round(notified), Number(waitingShare.toFixed(2)));
      readings = [];
      await readInserts();
      await options.want(false).catch(failed);
      return;
    }
    // The rate that decides: rows the application inserts (the table's counter), else the rows this drain settles
    // (which a slow destination, or other runtimes on the schema, hold under the insert rate: an outside review saw
    // the listener come back every 6 s while 600 rows a second kept coming for a destination taking 100).
    // Both must be low: the table's counter lags (each session reports it at most once a second), and a window of it
    // can read 0 under load.
    const inserts = await readInserts();
    const rate = Math.max(inserts ?? 0, claimed);
    if (at - asideSince < minAsideMs || rate >= Math.min(exitPerSecond, enteredAt / 2)) return;
    // Held now: every transaction that notified nobody has ended, and the claim this wakes sees its rows. Until then
    // the drain keeps its fast wake-ups (an outside review: they stopped before the take, which could fail).
    const held = await options.want(true).catch((error: unknown) => {
      failed(error);
      return false;
    });
    // Notifications while aside: another session holds the lock (another runtime, or one of an older version), and
    // its notifications wake this drain too.
    if (!held && heardAside === 0) {
      // Still aside: the capture must not take the lock later by itself while the load may come back.
      await options.want(false).catch(failed);
      return;
    }
    aside = false;
    stopPolling();
    tell(false, Math.round(rate));
    wake();
  };

  /** The readings of the outbox's insert counter while aside, the last few (a rate over about 3 s). */
  let readings: { count: number; at: number }[] = [];
  /** Rows inserted into the outbox a second over the last readings, or undefined when the capture cannot tell. */
  const readInserts = async (): Promise<number | undefined> => {
    if (options.outboxInserts === undefined) return undefined;
    const count = await options.outboxInserts().catch(() => undefined);
    if (count === undefined) {
      readings = [];
      return undefined;
    }
    const at = now();
    readings = [...readings.slice(-3), { count, at }];
    const first = readings[0] as { count: number; at: number };
    if (readings.length < 2 || at <= first.at) return undefined;
    return ((count - first.count) * 1000) / (at - first.at);
  };

  const timer = setInterval(() => {
    if (deciding || closed) return;
    deciding = true;
    void decide().finally(() => {
      deciding = false;
    });
  }, checkMs);
  timer.unref?.();

  const { waitingCommits } = options;
  const sampler =
    waitingCommits === undefined
      ? undefined
      : setInterval(() => {
          // Only while listening and notifications arrive: an idle runtime sends nothing.
          if (aside || closed || sampling || sinceSample === 0) return;
          sinceSample = 0;
          sampling = true;
          waitingCommits()
            .then((waiting) => {
              samples += 1;
              if (waiting > 0) busySamples += 1;
            })
            .catch(() => {
              // Not counted: the capture's own check finds a connection that is gone, and says so.
            })
            .finally(() => {
              sampling = false;
            });
        }, sampleMs);
  sampler?.unref?.();

  return {
    notified() {
      notifications += 1;
      sinceSample += 1;
    },
    claimed(count) {
      rows += count;
    },
    get aside() {
      return aside;
    },
    close() {
      closed = true;
      clearInterval(timer);
      clearInterval(sampler);
      stopPolling();
    },
  };
}
