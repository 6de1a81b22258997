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
 * - listening, and notifications arrived at `enterPerSecond` (500/s) or faster over the last check: let go of the
 *   lock (`want(false)`: inserts then notify nobody, and commit side by side) and wake the drain every `pollMs`
 *   (5 ms) instead. A row then waits at most `pollMs` for its claim.
 * - aside for at least `minAsideMs` (5 s), and the drain claimed fewer than `exitPerSecond` (250) rows a second over
 *   the last check: take the lock back (`want(true)`) and stop the fast wake-ups. The take succeeds only once every
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
  /** Told of each change, with the rate that decided it. Default: nothing. */
  readonly onChange?: (aside: boolean, perSecond: number) => void;
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
} as const;

/** A running step-aside decision. */
export interface StepAside {
  /** One outbox notification arrived. */
  notified(): void;
  /** An outbox drain claimed `rows`. */
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
  const now = options.now ?? (() => performance.now());
  let aside = false;
  let asideSince = 0;
  let notifications = 0;
  let rows = 0;
  let windowStart = now();
  let deciding = false;
  let closed = false;
  let poll: ReturnType<typeof setInterval> | undefined;

  const tell = (to: boolean, perSecond: number) => {
    try {
      options.onChange?.(to, perSecond);
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
    notifications = 0;
    rows = 0;
    windowStart = at;
    if (!aside) {
      if (notified < enterPerSecond) return;
      aside = true;
      asideSince = at;
      poll = setInterval(wake, pollMs);
      poll.unref?.();
      tell(true, Math.round(notified));
      await options.want(false).catch(failed);
      return;
    }
    if (at - asideSince < minAsideMs || claimed >= exitPerSecond) return;
    aside = false;
    stopPolling();
    tell(false, Math.round(claimed));
    // Held now: every transaction that notified nobody has ended, and the claim this wakes sees its rows. Not held
    // yet: the capture tries again each second and wakes the drains when it takes it.
    const held = await options.want(true).catch((error: unknown) => {
      failed(error);
      return false;
    });
    if (held) wake();
  };

  const timer = setInterval(() => {
    if (deciding || closed) return;
    deciding = true;
    void decide().finally(() => {
      deciding = false;
    });
  }, checkMs);
  timer.unref?.();

  return {
    notified() {
      notifications += 1;
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
      stopPolling();
    },
  };
}
