import { type Clock, intervalPassed, systemClock } from '@queuebox/core';

/** Default least time between two wake-ups a process sends: 1 s. A woken tick keeps its drain open this long. */
export const DEFAULT_WAKE_UP_INTERVAL_MS = 1000;

/** Options of {@link createWakeUp}. */
export interface WakeUpOptions {
  /** Sends one wake-up, e.g. an asynchronous Lambda invoke of relay-tick or outbox-tick. */
  readonly send: () => Promise<void>;
  /** Least time between the starts of two wake-ups that were sent; requests in between are dropped. Default 1000 ms. */
  readonly minIntervalMs?: number;
  /** Default the system clock. */
  readonly clock?: Clock;
  /** Told when a send failed; the error goes no further. Default: ignored. */
  readonly onError?: (error: unknown) => void;
}

/** A debounced wake-up. */
export interface WakeUp {
  /**
   * Sends a wake-up unless one was sent less than `minIntervalMs` ago or is being sent now. Never rejects: a
   * wake-up only cuts latency, the scheduled tick still finds the work (docs/design.md §3). Answers whether it sent
   * one; a failed send does not count, so the next request tries again.
   */
  request(): Promise<boolean>;
}

/**
 * Creates a wake-up that sends at most once per `minIntervalMs` (default 1000 ms) per process, i.e. per Lambda
 * container: the first request sends at once, later ones within the interval are dropped. Their rows are found by
 * the drain the first one started, because a woken tick keeps its drain open until `minIntervalMs` after it started
 * (`drainCoveringWakeUps` in functions/lambda-shell): a tick that finished in 100 ms would otherwise leave a row
 * stored 400 ms after the first one to the next wake-up or the periodic safety tick (an outside audit: 6 hours by
 * default). No trailing send: a frozen Lambda container runs no timer.
 */
export function createWakeUp(options: WakeUpOptions): WakeUp {
  const clock = options.clock ?? systemClock;
  const minIntervalMs = options.minIntervalMs ?? DEFAULT_WAKE_UP_INTERVAL_MS;
  let lastSentAt: number | undefined;
  let sending = false;
  return {
    async request() {
      const now = clock.now();
      if (sending || (lastSentAt !== undefined && !intervalPassed(now, lastSentAt, minIntervalMs)))
        return false;
      sending = true;
      try {
        await options.send();
        lastSentAt = now;
        return true;
      } catch (error) {
        options.onError?.(error);
        return false;
      } finally {
        sending = false;
      }
    },
  };
}
