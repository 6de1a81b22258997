import type { ReclaimReport } from './ports/claims.ts';

/**
 * Why a drain returned: no claimable row was left (`empty`), the deadline came (`time`), the caller's signal
 * aborted it, or the worker was closed.
 */
export type DrainStop = 'empty' | 'time' | 'aborted' | 'closed';

/**
 * What one drain of a claiming worker did: the outbox poller's `OutboxDrainReport` and the relay's
 * `RelayDrainReport` add the counts of their own settles to these.
 */
export interface DrainReport {
  /** The reclaim step at the start (zeros when the drain skipped it). */
  readonly reclaimed: ReclaimReport;
  /** Claims made. */
  readonly batches: number;
  /** Rows claimed. */
  readonly claimed: number;
  /** Rows dead-lettered. */
  readonly dead: number;
  /** Settles refused because the claim was lost (lease expired and the row reclaimed); the rows were not touched. */
  readonly stale: number;
  readonly stoppedFor: DrainStop;
}

/** Options of {@link startDrainLoop}. */
export interface DrainLoopOptions<R> {
  /** One drain, to be finished by `deadline` (epoch milliseconds). */
  readonly drain: (deadline: number) => Promise<R>;
  /** Whether a report means "no work left" (pause) rather than "stopped for time" (drain again at once). */
  readonly isIdle: (report: R) => boolean;
  /** Whether a report means the drained service is closed for good: the loop ends. Default never. */
  readonly isFinished?: (report: R) => boolean;
  /** Pause after an idle drain. Default 100 ms. */
  readonly pollIntervalMs?: number;
  /** Time budget of one drain. Default 10000 ms. */
  readonly budgetMs?: number;
  /** Longest pause after consecutive failures (the pause doubles per failure from the poll interval). Default 5000 ms. */
  readonly maxErrorPauseMs?: number;
  /** Stops the loop: the drain in progress finishes, no new one starts, then `done` resolves. */
  readonly signal?: AbortSignal;
  readonly onDrain?: (report: R) => void;
  /** Called for every failed drain with the number of failures in a row (1 for the first). */
  readonly onError?: (error: unknown, failuresInARow: number) => void;
  /** Called when a drain succeeds after failures. */
  readonly onRecovered?: (failures: number) => void;
  /** Default `Date.now`. */
  readonly now?: () => number;
}

/** A running loop. */
export interface DrainLoop {
  /** Starts the next drain now instead of after the pause; a wake-up during a drain is remembered. */
  wake(): void;
  /** Resolves once the loop stopped after the signal aborted. Never rejects. */
  readonly done: Promise<void>;
}

/** The longest delay one `setTimeout` waits; Node fires a longer one after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Runs `drain` over and over: at once while drains stop for time, after `pollIntervalMs` (or a `wake()`) when a
 * drain found nothing to do, and after a growing pause when drains fail, so an unavailable database is not
 * hammered. The local runtime's relay and outbox loops are this loop (through its `startTableLoop`).
 */
export function startDrainLoop<R>(options: DrainLoopOptions<R>): DrainLoop {
  const interval = options.pollIntervalMs ?? 100;
  const budgetMs = options.budgetMs ?? 10_000;
  const maxErrorPauseMs = Math.max(interval, options.maxErrorPauseMs ?? 5_000);
  const now = options.now ?? Date.now;
  const { signal } = options;
  let woken = false;
  let interrupt: (() => void) | undefined;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (woken || signal?.aborted) {
        resolve();
        return;
      }
      const finish = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', finish);
        interrupt = undefined;
        resolve();
      };
      // A pause longer than one timer waits (2^31 − 1 ms, about 24.8 days: a program's `maxErrorPauseMs: Infinity`
      // after 25 failures, or a poll interval that long) would fire after 1 ms, and the loop would drain without
      // pause. It waits that long instead, then drains again: an early drain is harmless.
      const timer = setTimeout(finish, Math.min(ms, MAX_TIMER_MS));
      signal?.addEventListener('abort', finish, { once: true });
      interrupt = finish;
    });

  const run = async () => {
    let failures = 0;
    while (!signal?.aborted) {
      woken = false;
      let wait = 0;
      try {
        const report = await options.drain(now() + budgetMs);
        if (failures > 0) options.onRecovered?.(failures);
        failures = 0;
        options.onDrain?.(report);
        if (options.isFinished?.(report)) break;
        if (options.isIdle(report)) wait = interval;
      } catch (error) {
        failures += 1;
        options.onError?.(error, failures);
        wait = Math.min(maxErrorPauseMs, interval * 2 ** Math.min(failures - 1, 30));
      }
      // A wake-up cuts even the back-off short: it means a row was just stored, so the database answers again.
      if (wait > 0) await pause(wait);
    }
  };

  return {
    wake() {
      woken = true;
      interrupt?.();
    },
    done: run(),
  };
}
