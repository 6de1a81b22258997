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
   * Time budget of one drain; a drain that runs out of time is followed at once by the next, which claims while the
   * requests of the one before finish (`DrainHandOff`). Default `drainBudgetFor(poller.longestRequestMs)`: 30 s
   * past the longest destination timeout (45 s with HTTP's 15 s).
   */
  readonly drainBudgetMs?: number;
  /** Longest pause after failed drains (it doubles per failure from the poll interval). Default 5000 ms. */
  readonly maxErrorPauseMs?: number;
  /**
   * Stops the loop: no new claim; the deliveries in flight, those of earlier drains included, finish and settle,
   * then `done` resolves.
   */
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
 *
 * The drains hand over (`loopDrainOf`): one that stops for time returns while its requests still run, and the next
 * claims beside them, so a slow request does not hold up the rows of other destinations or keys; while requests
 * are in flight a drain claims again after a wake-up, a keyed settle or `pollIntervalMs`. Each report counts the
 * settles of the drain's own rows that were done when it returned and those of earlier drains since their reports.
 */
export function startOutboxLoop(poller: OutboxPoller, options: OutboxLoopOptions = {}): OutboxLoop {
  const logger = options.logger ?? silentLogger;
  const clock = options.clock ?? systemClock;
  const { signal } = options;
  const pollIntervalMs = options.pollIntervalMs ?? CONFIG_DEFAULTS.outbox.pollIntervalMs;
  const budgetMs = options.drainBudgetMs ?? drainBudgetFor(poller.longestRequestMs ?? 0);
  const drains = loopDrainOf(poller, { pollIntervalMs, ...(signal ? { signal } : {}) });
  const reportError = (error: unknown, failures: number) => {
    options.onError?.(error, failures);
    if (failures === 1 || failures % 20 === 0) {
      logger.error('outbox drain failed; retrying with back-off', {
        failures,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  };
  const loop = startDrainLoop<OutboxDrainReport>({
    drain: drains.drain,
    isIdle: (report) => report.stoppedFor !== 'time',
    isFinished: (report) => report.stoppedFor === 'closed',
    pollIntervalMs,
    budgetMs,
    ...(options.maxErrorPauseMs !== undefined ? { maxErrorPauseMs: options.maxErrorPauseMs } : {}),
    ...(signal ? { signal } : {}),
    now: () => clock.now(),
    ...(options.onDrain ? { onDrain: options.onDrain } : {}),
    onError: reportError,
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
    // The requests a drain that handed over left in flight are settled and reported before the loop is done.
    done: loop.done.then(async () => {
      try {
        const report = await drains.finish(clock.now() + budgetMs);
        if (report !== undefined) options.onDrain?.(report);
      } catch (error) {
        reportError(error, 1);
      }
    }),
  };
}

/** The drain of a local loop (`loopDrainOf`). */
export interface LoopDrain {
  /** One drain for core's drain loop: `poller.drain` handing over to the next drain (`DrainHandOff`). */
  readonly drain: (deadline: number) => Promise<OutboxDrainReport>;
  /**
   * For after the loop stopped, before it says it is done. When the last drain handed over (it stopped for time and
   * the signal aborted before the next one started, e.g. in `onDrain`), one more drain, stopped at once by the
   * aborted signal, waits for the requests left in flight and reports what they settled; otherwise undefined.
   */
  readonly finish: (deadline: number) => Promise<OutboxDrainReport | undefined>;
}

/**
 * The drain a local loop runs over and over (`startOutboxLoop`, the local runtime's outbox loop): `poller.drain`
 * handing over to the next drain (`DrainHandOff`) with the loop's poll interval, and what to run once the loop
 * stopped (`finish`). Not for outbox-tick: its invocation must not return before its requests did.
 */
export function loopDrainOf(
  poller: OutboxPoller,
  options: { readonly pollIntervalMs: number; readonly signal?: AbortSignal },
): LoopDrain {
  const handOff = { pollIntervalMs: options.pollIntervalMs };
  const { signal } = options;
  let handedOver = false;
  const drain = async (deadline: number) => {
    handedOver = false;
    const report = await poller.drain({ deadline, handOff, ...(signal ? { signal } : {}) });
    handedOver = report.stoppedFor === 'time';
    return report;
  };
  return {
    drain,
    async finish(deadline) {
      if (!handedOver || signal?.aborted !== true) return undefined;
      return drain(deadline);
    },
  };
}
