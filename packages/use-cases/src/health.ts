import { type Store, StoreUnavailableError } from '@queuebox/core';
import type { JsonAnswer } from './api-gateway.ts';

/** Options of {@link checkHealth}. */
export interface HealthOptions {
  /** Longest wait for the database before the answer is 503. Default 2000 ms. */
  readonly timeoutMs?: number;
}

/** The outcome of a health check: the answer to send, and why it failed (for the log; never sent). */
export interface HealthAnswer extends JsonAnswer {
  readonly status: 200 | 503;
  readonly error?: unknown;
}

/**
 * `GET /health` as docs/design.md §7 defines it: 200 `{"status":"ok"}` when the database answers `store.ping()` within
 * `timeoutMs`, else 503 `{"status":"unavailable","error":"store_unavailable"}`. Never throws.
 */
export async function checkHealth(
  store: Pick<Store, 'ping'>,
  options: HealthOptions = {},
): Promise<HealthAnswer> {
  const timeoutMs = options.timeoutMs ?? 2000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      store.ping(),
      new Promise((_resolve, reject) => {
        // An outage like any other: a Lambda shell replaces its store on it (ServiceCache.fail).
        timer = setTimeout(
          () => reject(new StoreUnavailableError(`The database did not answer within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
    return { status: 200, body: { status: 'ok' } };
  } catch (error) {
    return { status: 503, body: { status: 'unavailable', error: 'store_unavailable' }, error };
  } finally {
    clearTimeout(timer);
  }
}
