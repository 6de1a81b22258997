import { type Clock, systemClock } from '@queuebox/core';
import { type OutboxLogger, silentLogger } from './logger.ts';
import type { DrainReport, OutboxPoller } from './poller.ts';

/** Options of `startOutboxLoop`. */
export interface OutboxLoopOptions {
  /** Pause after a drain that found no work, or failed. Default 100 ms (`outbox.pollIntervalMs`). */
  readonly pollIntervalMs?: number;
  /** Time budget of one drain; a drain that runs out of time is followed at once by the next. Default 10000 ms. */
  readonly drainBudgetMs?: number;
  /** Stops the loop: no new claim; deliveries in flight finish and settle, then `done` resolves. */
  readonly signal?: AbortSignal;
  /** Called after every drain. */
  readonly onDrain?: (report: DrainReport) => void;
  /** Default: silent. */
  readonly logger?: OutboxLogger;
  /** Default: the system clock. */
  readonly clock?: Clock;
}

/** A running local loop. */
export interface OutboxLoop {
  /** Starts the next drain now instead of after the poll interval (e.g. after a NOTIFY or an enqueue). */
  wake(): void;
  /** Resolves once the loop has stopped after `signal` aborted. Never rejects: drain errors are logged. */
  readonly done: Promise<void>;
}

/**
 * Runs `poller.drain` on a timer for the local runtime: drain, and when the drain found no work (or failed), wait
 * `pollIntervalMs` or until `wake()`. A wake-up during a drain is remembered, so the next drain starts at once.
 */
export function startOutboxLoop(poller: OutboxPoller, options: OutboxLoopOptions = {}): OutboxLoop {
  const interval = options.pollIntervalMs ?? 100;
  const budgetMs = options.drainBudgetMs ?? 10_000;
  const logger = options.logger ?? silentLogger;
  const clock = options.clock ?? systemClock;
  const signal = options.signal;
  let woken = false;
  let interrupt: (() => void) | undefined;

  const pause = () =>
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
      const timer = setTimeout(finish, interval);
      signal?.addEventListener('abort', finish, { once: true });
      interrupt = finish;
    });

  const run = async () => {
    while (!signal?.aborted) {
      woken = false;
      let idle = true;
      try {
        const report = await poller.drain({ deadline: clock.now() + budgetMs, signal });
        options.onDrain?.(report);
        idle = report.stoppedFor !== 'time';
        if (report.stoppedFor === 'closed') break;
      } catch (error) {
        logger.error('outbox drain failed; trying again after the poll interval', {
          error: error instanceof Error ? error.message : String(error),
        });
      }
      if (idle) await pause();
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
