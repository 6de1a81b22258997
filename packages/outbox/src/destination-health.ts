import { type Clock, intervalPassed, type Logger } from '@queuebox/core';

/** Default least time between two WARN lines about one failing destination: a minute. */
export const DEFAULT_DESTINATION_WARN_INTERVAL_MS = 60_000;

/** What one settle did for one destination: failed deliveries (retries) and sent rows. */
export interface DestinationSettle {
  /** Deliveries that failed and were retried (the store may have turned the last attempt of a row into dead). */
  readonly failures: number;
  /** The error of the last of them, as the publisher gave it (for HTTP the status and a masked excerpt). */
  readonly lastError?: string;
  /** Rows the destination accepted. */
  readonly sent: number;
}

/** Tells the operator, in the log, which destination fails and when it delivers again. */
export interface DestinationHealth {
  /** Records what one settle did, destination by destination, and writes the lines that are due. */
  record(byDestination: ReadonlyMap<string, DestinationSettle>): void;
}

interface DestinationState {
  /** Failed deliveries since the last line about this destination. */
  retries: number;
  lastError: string;
  /** When the last WARN about it was written (the clock's ms). */
  lastWarnAt: number;
  /** The first failure since it last delivered (or since the start); undefined while it delivers. */
  failingSince: number | undefined;
  /** Whether a WARN was written since it last delivered, so its recovery is worth a line. */
  warned: boolean;
}

/**
 * Destination health in the log, per destination and rate-limited, so that an outage of one destination among
 * many is seen at `logLevel: info` (each retry alone is a DEBUG line):
 *
 * - WARN `outbox destination failing` when its deliveries start failing (a retry: any failed delivery with an
 *   attempt left, a 4xx included), and again while they go on failing, at most once per
 *   `intervalMs`: `destination`, `error` (the last error, as the publisher gave it: already masked), `retries`
 *   (failed deliveries since the last line about it) and `failingForMs` (since its first failure);
 * - INFO `outbox destination delivers again` at the first settle that has rows it accepted and none it failed,
 *   after a WARN: `destination`, `retries` (those not counted in a WARN yet) and `failedForMs`.
 *
 * A row that goes dead (no route, a transform's rejection, a destination's lower `maxAttempts`) is not counted
 * here: each is its own WARN `outbox row dead`. The state is this process's, one entry per destination name (the
 * configured ones).
 */
export function createDestinationHealth(deps: {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly intervalMs?: number;
}): DestinationHealth {
  const { logger, clock } = deps;
  const intervalMs = Math.max(0, deps.intervalMs ?? DEFAULT_DESTINATION_WARN_INTERVAL_MS);
  const states = new Map<string, DestinationState>();

  return {
    record(byDestination) {
      const now = clock.now();
      for (const [destination, { failures, lastError, sent }] of byDestination) {
        let state = states.get(destination);
        if (failures > 0) {
          if (state === undefined) {
            state = {
              retries: 0,
              lastError: '',
              lastWarnAt: Number.NEGATIVE_INFINITY,
              failingSince: undefined,
              warned: false,
            };
            states.set(destination, state);
          }
          state.retries += failures;
          state.lastError = lastError ?? state.lastError;
          state.failingSince ??= now;
          // intervalPassed: a wall clock stepped back (NTP, a resumed VM) silenced a failing destination for the step.
          if (intervalPassed(now, state.lastWarnAt, intervalMs)) {
            logger.warn('outbox destination failing', {
              destination,
              error: state.lastError,
              retries: state.retries,
              failingForMs: Math.max(0, now - state.failingSince),
            });
            state.retries = 0;
            state.lastWarnAt = now;
            state.warned = true;
          }
        } else if (sent > 0 && state?.failingSince !== undefined) {
          if (state.warned) {
            logger.info('outbox destination delivers again', {
              destination,
              retries: state.retries,
              failedForMs: Math.max(0, now - state.failingSince),
            });
            state.retries = 0;
            state.warned = false;
          }
          // Failures not written yet (they came within `intervalMs` of the last WARN) go into the next WARN.
          state.failingSince = undefined;
        }
      }
    },
  };
}
