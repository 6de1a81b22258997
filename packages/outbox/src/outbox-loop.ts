import {
  type Clock,
  CONFIG_DEFAULTS,
  type DrainLoop,
  type Logger,
  silentLogger,
  startDrainLoop,
  systemClock,
} from '@queuebox/core';
import { drainBudgetFor } from './delivery.ts';
import type { OutboxDrainReport, OutboxPoller } from './poller.ts';

/** Options of `startOutboxLoop`. */
export interface OutboxLoopOptions {
  /** Pause after a drain that found no work. Default 100 ms (`outbox.pollIntervalMs`). */
  readonly pollIntervalMs?: number;
  /**
   * Time budget of one drain; a drain that runs out of time is followed at once by the next. Default
   * `drainBudgetFor(poller.longestRequestMs)`: 30 s past the longest destination timeout (45 s with HTTP's 15 s).
   */
  readonly drainBudgetMs?: number;
  /** Longest pause after failed drains (it doubles per failure from the poll interval). Default 5000 ms. */
  readonly maxErrorPauseMs?: number;
  /** Stops the loop: no new claim; deliveries in flight finish and settle, then `done` resolves. */
  readonly signal?: AbortSignal;
  /** Called after every drain. */
  readonly onDrain?: (report: OutboxDrainReport) => void;
  /** Called for every failed drain with the number of failures in a row. Default: none (the logger reports). */
  readonly onError?: (error: unknown, failuresInARow: number) => void;
  /** Default: silent. */
  readonly logger?: Logger;
  /** Default: the system clock. */
  readonly clock?: Clock;
}

/** A running local loop. */
export type OutboxLoop = DrainLoop;

/**
 * Runs `poller.drain` on core's drain loop for the local runtime: drain, and when the drain found no work wait
 * `pollIntervalMs` or until `wake()`; after failures wait longer (doubling, at most `maxErrorPauseMs`), logging
 * the first failure and every 20th, so an unavailable database is neither hammered nor flooding the log. A
 * wake-up during a drain is remembered, so the next drain starts at once. A closed poller ends the loop.
 */
export function startOutboxLoop(poller: OutboxPoller, options: OutboxLoopOptions = {}): OutboxLoop {
  const logger = options.logger ?? silentLogger;
  const clock = options.clock ?? systemClock;
  const { signal } = options;
  const loop = startDrainLoop<OutboxDrainReport>({
    drain: (deadline) => poller.drain({ deadline, ...(signal ? { signal } : {}) }),
    isIdle: (report) => report.stoppedFor !== 'time',
    isFinished: (report) => report.stoppedFor === 'closed',
    pollIntervalMs: options.pollIntervalMs ?? CONFIG_DEFAULTS.outbox.pollIntervalMs,
    budgetMs: options.drainBudgetMs ?? drainBudgetFor(poller.longestRequestMs ?? 0),
    ...(options.maxErrorPauseMs !== undefined ? { maxErrorPauseMs: options.maxErrorPauseMs } : {}),
    ...(signal ? { signal } : {}),
    now: () => clock.now(),
    ...(options.onDrain ? { onDrain: options.onDrain } : {}),
    onError(error, failures) {
      options.onError?.(error, failures);
      if (failures === 1 || failures % 20 === 0) {
        logger.error('outbox drain failed; retrying with back-off', {
          failures,
          error: error instanceof Error ? error.message : String(error),
        });
      }
    },
    onRecovered(failures) {
      logger.info('outbox drain recovered', { failures });
    },
  });
  return {
    // The drain in progress claims again at once; the loop starts the next drain as soon as that one ends.
    wake() {
      poller.wake?.();
      loop.wake();
    },
    done: loop.done,
  };
}
