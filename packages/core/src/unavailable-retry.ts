import { isTransientConflict, StoreUnavailableError } from './errors.ts';

/** First and longest pause between two tries of a write the database could not take. */
export const UNAVAILABLE_RETRY_FIRST_MS = 100;
export const UNAVAILABLE_RETRY_MAX_MS = 2000;

/** How {@link retryWhileUnavailable} tries again, and until when. */
export interface UnavailableRetryOptions {
  /** No try starts at or after this time (`now`'s milliseconds). */
  readonly until: number;
  /** True once the tries should end before `until` (a closing poller). */
  readonly stopped?: () => boolean;
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  /** The error of a first try made elsewhere (the relay's forward-and-claim): `write` is then only a try again. */
  readonly failed?: { readonly error: unknown };
  /** Called before each pause, with the error and the tries that failed so far (1 for the first). */
  readonly onUnavailable?: (error: Error, failures: number) => void;
}

/**
 * Runs `write`, and again while it fails with `StoreUnavailableError` (a restart, a failover) or a transient
 * conflict (core's `isTransientConflict`: a deadlock victim, e.g. beside a migration's lock) and the next try can
 * start before `until`, pausing 0.1 s doubling to 2 s. Any other error, the last outage, or a stop is thrown. For
 * writes whose outcome is already known to the caller (a settle's verdicts, a relay's mapped rows): a blip of the
 * database then no longer leaves their rows to their lease. The write must be fenced (claim tokens): a try that
 * committed although its answer was lost makes the next one find its rows settled, as stale.
 */
export async function retryWhileUnavailable<T>(
  write: () => Promise<T>,
  options: UnavailableRetryOptions,
): Promise<T> {
  let failure = options.failed;
  let failures = failure === undefined ? 0 : 1;
  let pause = UNAVAILABLE_RETRY_FIRST_MS;
  for (;;) {
    if (failure !== undefined) {
      const { error } = failure;
      const again = error instanceof StoreUnavailableError || isTransientConflict(error);
      if (
        !again ||
        !(error instanceof Error) ||
        options.stopped?.() === true ||
        options.now() + pause >= options.until
      ) {
        throw error;
      }
      options.onUnavailable?.(error, failures);
      await options.sleep(pause);
      pause = Math.min(pause * 2, UNAVAILABLE_RETRY_MAX_MS);
    }
    try {
      return await write();
    } catch (error) {
      failure = { error };
      failures++;
    }
  }
}
