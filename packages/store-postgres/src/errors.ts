import { QueueBoxError, StoreError, StoreUnavailableError } from '@queuebox/core';

/**
 * SQLSTATEs that mean "the server cannot serve you now": shutdown, start-up, too many connections, and a session
 * the server closed for idling (`idle_session_timeout`, 57P05: what a frozen Lambda container's pooled connection
 * meets on the next invocation).
 */
// 25006: a read-only transaction, as every session on a standby is: after a failover, a connection that reached the
// demoted writer (a cached DNS answer) failed every write for as long as the pool kept it; as an outage it is
// dropped and the next one reaches the new writer.
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '57P05', '53300', '25006']);

/** SQLSTATEs of a statement that goes through when run again later (see `translateError`). */
const TRANSIENT_SQLSTATES = new Set(['40P01', '40001', '55P03', '57014', '53200', '53100']);

/** The server closed the session while it sat idle: nothing sent on it afterwards ran, so a retry is safe. */
export function isIdleSessionClosed(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 4; depth++) {
    if (sqlStateOf(current) === '57P05') return true;
    current = current.cause;
  }
  return false;
}

/** Socket errors of Node that mean the server is unreachable or went away. */
const UNAVAILABLE_SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

/**
 * Messages of pg, pg-pool and PGlite for a connection that is gone or never came; they carry no code.
 * `not queryable` is pg's client after a connection error, `calling end` a pool that was closed.
 */
const UNAVAILABLE_MESSAGES =
  /Connection terminated|connection error|timeout exceeded when trying to connect|not queryable|Cannot use a pool after calling end|PGlite is closed|PGlite is not ready/i;

/** The SQLSTATE of a driver error (pg and PGlite both put it in `code`), when it has one. */
export function sqlStateOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** Whether a driver error means the database is unreachable (the caller may retry later). */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return true;
  if (error instanceof AggregateError) return error.errors.some(isUnavailable);
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_SOCKET_CODES.has(code)) return true;
    const state = sqlStateOf(error);
    if (state && (state.startsWith('08') || UNAVAILABLE_SQLSTATES.has(state))) return true;
  }
  return error instanceof Error && UNAVAILABLE_MESSAGES.test(error.message);
}

/**
 * Whether a SQLSTATE refuses the statement's values, so the same row would be refused again (core's
 * `isValueRefused`): class 22 (data exception: a value out of range, text not UTF-8, JSON), 23 (a constraint; a
 * unique violation is answered as a duplicate before it gets here), 54 (a limit: a value too large) and P0 (a
 * trigger's RAISE).
 */
function refusesValues(sqlState: string): boolean {
  return sqlState !== '23505' && /^(22|23|54|P0)/.test(sqlState);
}

/**
 * What "out of shared memory" (53200) means where QueueBox meets it: the server's lock table is full. Every lock an
 * open transaction holds takes a slot of one table shared by the whole server —
 * max_locks_per_transaction × (max_connections + max_prepared_transactions) slots, 6,400 with the defaults — and an
 * enqueue takes one advisory lock per distinct key, held until the application's transaction ends.
 */
const LOCK_TABLE_FULL =
  "The database server's lock table is full (SQLSTATE 53200): the locks held by open transactions — among them the " +
  "outbox key locks, one per distinct key an enqueue names, held until the application's transaction ends — " +
  'exhausted max_locks_per_transaction × (max_connections + max_prepared_transactions) slots, shared by the ' +
  'whole server. Enqueue fewer distinct keys per transaction, or raise max_locks_per_transaction (takes a ' +
  'restart): ';

/**
 * Translates a driver error into core's errors: `StoreUnavailableError` when the database cannot be reached or
 * went away (socket errors, SQLSTATE class 08, 57P01/57P02/57P03/57P05, 53300, and 25006: a read-only session) or
 * refused the credentials (class 28, with `context.credentialsRefused`), `StoreError` for anything else. The
 * driver error is the `cause`; `context.sqlState` carries its SQLSTATE, and `context.valueRefused` is true when it
 * refuses the statement's values (see `refusesValues`). "Out of shared memory" (53200) says that the server's
 * lock table is full and names the setting (see `LOCK_TABLE_FULL`). QueueBox errors pass through unchanged.
 * Statement parameters are never copied into the error: they may hold payloads.
 */
export function translateError(error: unknown): QueueBoxError {
  if (error instanceof QueueBoxError) return error;
  const sqlState = sqlStateOf(error);
  const detail = error instanceof Error ? error.message || error.name : String(error);
  if (sqlState === '53200' && /shared memory/i.test(detail)) {
    return new StoreError(LOCK_TABLE_FULL + detail, {
      cause: error,
      context: { sqlState, transientConflict: true },
    });
  }
  const context: Record<string, unknown> = sqlState ? { sqlState } : {};
  if (sqlState !== undefined && refusesValues(sqlState)) context.valueRefused = true;
  // A deadlock victim (beside a migration's lock, say) or a serialization failure, and a statement the server gave up
  // on for the moment: a lock or statement timeout set on the role or the database (55P03, 57014; QueueBox's own
  // query timeout is client-side and answers unavailable), a full lock table or a full disk (53200, 53100). The same
  // statement goes through when run again later: fenced writes are tried again (core's `isTransientConflict`,
  // `retryWhileUnavailable`), a webhook is answered 503 with Retry-After, a broker delivery is held. Before (an
  // outside audit), a role's statement_timeout behind a DBA's lock left a delivered row's settle untried (it went
  // out again after its lease) and answered webhooks 500.
  if (sqlState !== undefined && TRANSIENT_SQLSTATES.has(sqlState)) context.transientConflict = true;
  if (sqlState?.startsWith('28')) {
    // Invalid authorization (28P01: a wrong password, 28000: a role that may not log in): most often a rotated
    // password that a warm process still holds. An outage, not a bug: webhooks get 503 and are retried, broker and
    // SQS messages are handed back, and a caller that caches its configuration reads it anew.
    context.credentialsRefused = true;
    return new StoreUnavailableError(
      `The database refused QueueBox's credentials (a rotated password?): ${detail}`,
      { cause: error, context },
    );
  }
  if (isUnavailable(error)) {
    return new StoreUnavailableError(`The database is unavailable: ${detail}`, { cause: error, context });
  }
  return new StoreError(`A database statement failed: ${detail}`, { cause: error, context });
}
