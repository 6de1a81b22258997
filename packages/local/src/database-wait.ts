import { errorFields, type LogFields, type Logger, StoreUnavailableError } from '@queuebox/core';

/** The pauses and the log rate of {@link waitForDatabase}. */
export interface DatabaseWaitTiming {
  /** Pause after the first failed try; it doubles after each further one. Default 500 ms. */
  readonly firstDelayMs?: number;
  /** Longest pause between two tries. Default 5000 ms. */
  readonly maxDelayMs?: number;
  /** After the first WARN line, at most one more per this many milliseconds. Default 30000 ms. */
  readonly warnIntervalMs?: number;
}

/** Options of {@link waitForDatabase}. */
export interface DatabaseWaitOptions extends DatabaseWaitTiming {
  /**
   * One try at what needs the database before the runtime can serve (a ping, then the migrations). A
   * `StoreUnavailableError` (the store's own word that the database cannot be reached now: refused, reset, timed
   * out, name not resolved yet, SQLSTATE class 08, 57P01/57P02/57P03/57P05, 53300) is tried again; any other error is
   * thrown at once.
   */
  readonly attempt: () => Promise<void>;
  /**
   * Abandons the wait: the try in progress is no longer awaited, and `waitForDatabase` rejects with the signal's
   * `reason`.
   */
  readonly signal?: AbortSignal | undefined;
  readonly log: Logger;
  /** More fields of the WARN line (where `/health` answers, so an operator can probe it). */
  readonly fields?: LogFields;
  /** Default `Date.now`. */
  readonly now?: () => number;
  /** Default `Math.random`. */
  readonly random?: () => number;
}

/** What {@link waitForDatabase} waited. */
export interface DatabaseWaitReport {
  /** Tries, the successful one included (1: the database answered at once). */
  readonly attempts: number;
  readonly waitedMs: number;
}

/**
 * SQL Server's "Login failed for user" (error 18456). The SQL Server store reports it as `StoreUnavailableError`
 * (as the PostgreSQL store reports class 28: a rotated password, for a running Lambda function that reads its
 * secrets again), so a running process rides out a failover that refuses logins for a moment; at start it is a wrong
 * user or password far more often, and it ends the start instead of being waited for (an operator who left it
 * waiting would see only WARN lines and 503s). Its `4060` (cannot open the database: being restored, failing over,
 * or not there) is still waited for, with the WARN naming it.
 */
export const SQLSERVER_LOGIN_FAILED = 18456;

/**
 * Whether a `StoreUnavailableError` should still end a start: refused credentials (`context.credentialsRefused`, which
 * both stores set: PostgreSQL's class 28, SQL Server's {@link SQLSERVER_LOGIN_FAILED}), since the runtime reads its
 * configuration once and waiting would not bring another password.
 */
export function permanentAtStart(error: StoreUnavailableError): boolean {
  return error.context.credentialsRefused === true || error.context.number === SQLSERVER_LOGIN_FAILED;
}

export const DATABASE_WAIT_FIRST_DELAY_MS = 500;
export const DATABASE_WAIT_MAX_DELAY_MS = 5_000;
export const DATABASE_WAIT_WARN_INTERVAL_MS = 30_000;

/**
 * Runs `attempt` until it succeeds, as long as it fails with `StoreUnavailableError`: a runtime started before its
 * database (a container next to a database container that is still starting) waits for it instead of exiting. The
 * pauses grow from `firstDelayMs`, doubling, to `maxDelayMs`, each with equal jitter (between half and all of it), so
 * replicas started together do not knock in step. The first failure is logged as a WARN with its cause, and then at
 * most one line per `warnIntervalMs` with the latest cause; an INFO line says when the database answered after a
 * wait. Any other error (authentication failed, no such database, no privilege, a migration that fails) is thrown
 * at once: waiting would not mend it; so is SQL Server's failed login, although its store calls it unavailable
 * ({@link SQLSERVER_LOGIN_FAILED}).
 */
export async function waitForDatabase(options: DatabaseWaitOptions): Promise<DatabaseWaitReport> {
  const { signal, log } = options;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const maxDelayMs = options.maxDelayMs ?? DATABASE_WAIT_MAX_DELAY_MS;
  const warnIntervalMs = options.warnIntervalMs ?? DATABASE_WAIT_WARN_INTERVAL_MS;
  const started = now();
  let pause = Math.min(options.firstDelayMs ?? DATABASE_WAIT_FIRST_DELAY_MS, maxDelayMs);
  let failures = 0;
  let warnedAt: number | undefined;
  for (;;) {
    signal?.throwIfAborted();
    try {
      await untilAborted(options.attempt(), signal);
      const report = { attempts: failures + 1, waitedMs: now() - started };
      if (failures > 0) log.info('database answers; starting', { ...report });
      return report;
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (!(error instanceof StoreUnavailableError) || permanentAtStart(error)) throw error;
      failures++;
      const delayMs = Math.round(pause / 2 + (random() * pause) / 2);
      const at = now();
      if (warnedAt === undefined || at - warnedAt >= warnIntervalMs) {
        warnedAt = at;
        const sqlState = error.context.sqlState;
        log.warn('database unavailable; waiting for it before starting', {
          ...options.fields,
          failures,
          waitedMs: at - started,
          retryInMs: delayMs,
          error: errorFields(error),
          ...(typeof sqlState === 'string' ? { sqlState } : {}),
        });
      }
      await sleep(delayMs, signal);
      pause = Math.min(pause * 2, maxDelayMs);
    }
  }
}

/** `work`, or the signal's reason as soon as it aborts (`work` then runs on unobserved). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  work.catch(() => undefined);
  return new Promise<T>((resolvePromise, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolvePromise, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolvePromise, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolvePromise();
    }, ms);
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
