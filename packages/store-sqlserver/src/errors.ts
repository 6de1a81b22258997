import { QueueBoxError, StoreError, StoreUnavailableError } from '@queuebox/core';

/**
 * SQL Server error numbers that mean "the server cannot serve you right now" rather than "this statement is
 * wrong": transport failures, a database that is starting, moving or paused, and resource throttling (Azure SQL /
 * RDS documented transient errors). A lock wait that ran out (1222) or a full lock table (1204) is not an outage:
 * see {@link TRANSIENT_CONFLICT_NUMBERS}.
 */
export const TRANSIENT_ERROR_NUMBERS: ReadonlySet<number> = new Set([
  -2, // client-side timeout reported by some drivers as a number
  64, // the connection was closed by the transport
  233, // no process is on the other end of the pipe
  615, // could not find database (mid fail-over)
  921, // database has not been recovered yet
  926, // database cannot be opened (suspect / recovering)
  4060, // cannot open database requested by the login
  4221, // login to a read-secondary failed, replica is not ready
  10053, // transport-level error: connection aborted
  10054, // transport-level error: connection reset by peer
  3906, // the database is read-only (a demoted primary, as PostgreSQL's 25006)
  10060, // transport-level error: connection attempt timed out
  10928, // resource limit reached (Azure)
  10929, // resource governance minimum not met (Azure)
  10936, // request limit of the elastic pool reached (Azure)
  18456, // login failed (a rotated password, most often: `context.credentialsRefused`)
  40143, // the service has encountered an error processing your request (Azure)
  40197, // service error while processing the request (Azure fail-over)
  40501, // the service is currently busy
  40613, // database is not currently available
  42108, // cannot connect to the SQL pool
  42109, // the SQL pool is warming up
  49918, // not enough resources to process the request
  49919, // too many create/update operations in progress
  49920, // too many operations in progress
]);

/**
 * Error numbers of a statement the server gave up on for the moment, which goes through when run again later:
 * `StoreError` with `context.transientConflict` (core's `isTransientConflict`), as store-postgres makes its
 * SQLSTATEs 40001, 55P03, 53200 and 53100. Fenced writes are tried again within their deadline, a webhook is
 * answered 503 with Retry-After, a broker delivery is held. Before, the lock errors were outages (a broker source
 * stopped at once) and a full log or disk a plain `StoreError` (a webhook answered 500, a delivered row's settle
 * left untried, so it went out again after its lease). The deadlock victim (1205) is one too, with its own message.
 */
export const TRANSIENT_CONFLICT_NUMBERS: ReadonlySet<number> = new Set([
  3960, // snapshot isolation transaction aborted due to an update conflict (PostgreSQL's 40001)
  1222, // lock request time out period exceeded: a wait past LOCK_TIMEOUT (55P03)
  1204, // the instance cannot obtain a LOCK resource at this time: lock memory exhausted (53200, the lock table)
  701, // insufficient system memory in the resource pool to run the query (53200, out of memory)
  8645, // a timeout occurred while waiting for memory resources to execute the query (53200)
  9002, // the transaction log of the database is full (53100, disk full)
  1105, // could not allocate space for an object: its filegroup is full (53100)
  40544, // the database has reached its size quota (Azure SQL; 53100)
]);

/** Login failed: the credentials were refused (a rotated password, most often). */
const LOGIN_FAILED = 18456;

/**
 * Whether the text of a login-phase error (tedious raises every one as `ELOGIN` with no number: 18456, but also 4060
 * "Cannot open database", 40613 "not currently available", 18401 "Server is in script upgrade mode") is 18456's:
 * only that one refuses the credentials; the others are waited out.
 */
function isLoginFailedText(text: string): boolean {
  return /Login failed for user/i.test(text) && !/Reason: Server is in/i.test(text);
}

/** The deadlock-victim error number; the transaction was rolled back and can be run again. */
export const DEADLOCK_VICTIM = 1205;

/** Lock request time out period exceeded: a statement waited LOCK_TIMEOUT for a row lock. */
export const LOCK_TIMEOUT = 1222;

/** String or binary data would be truncated; SQL Server 2019+ quotes the value it would have cut. */
export const TRUNCATION = 2628;

/**
 * `context.appLockStatus` of the error the store raises when `sp_getapplock` answers -3 (chosen as a deadlock
 * victim): the same as error 1205 for the deadlock retries.
 */
export const APPLOCK_DEADLOCK_STATUS = -3;

/**
 * Error numbers that refuse the statement's values, so the same row would be refused again (core's
 * `isValueRefused`): conversions, overflows, truncation, NULL into NOT NULL, constraints, JSON text, and errors a
 * trigger raises (50000 and above).
 */
export const VALUE_REFUSED_NUMBERS: ReadonlySet<number> = new Set([
  220, // arithmetic overflow for a data type
  241, // conversion of a date or time from text failed
  242, // a date or time out of range
  245, // conversion failed (text to a number)
  515, // NULL into a NOT NULL column
  547, // a CHECK or FOREIGN KEY constraint
  2628, // string or binary data would be truncated (2019+)
  8114, // error converting a data type
  8115, // arithmetic overflow
  8152, // string or binary data would be truncated
  13609, // JSON text is not properly formatted
]);

function refusesValues(number: number | undefined): boolean {
  return number !== undefined && (VALUE_REFUSED_NUMBERS.has(number) || number >= 50_000);
}

/** Unique index (2601) and unique constraint (2627) violations. */
export const UNIQUE_VIOLATIONS: ReadonlySet<number> = new Set([2601, 2627]);

/**
 * `code` values of mssql / tedious errors that say the connection, not the statement, failed. `ETIMEOUT` covers
 * both a connect timeout and a request timeout; either way the caller may retry later.
 */
export const UNAVAILABLE_CODES: ReadonlySet<string> = new Set([
  'ELOGIN',
  'ETIMEOUT',
  'ESOCKET',
  'ECONNCLOSED',
  'ECONNRESET',
  'ECONNREFUSED',
  'ENOTFOUND',
  'EINSTLOOKUP',
  'ENOTOPEN',
  'ENOCONN',
  'EALREADYCONNECTING',
]);

/** The fields of an mssql `RequestError` / `ConnectionError` / `TransactionError` that translation reads. */
interface DriverErrorShape {
  readonly name?: unknown;
  readonly code?: unknown;
  readonly number?: unknown;
  readonly originalError?: unknown;
  readonly cause?: unknown;
}

function asShape(error: unknown): DriverErrorShape | undefined {
  return typeof error === 'object' && error !== null ? (error as DriverErrorShape) : undefined;
}

/**
 * The SQL Server error number carried by `error`, looking through `cause` (our translated errors) and
 * `originalError` (mssql's wrappers). Undefined when there is none.
 */
export function driverErrorNumber(error: unknown): number | undefined {
  for (let current = asShape(error), depth = 0; current && depth < 5; depth++) {
    if (typeof current.number === 'number') return current.number;
    current = asShape(current.cause) ?? asShape(current.originalError);
  }
  return undefined;
}

/** The driver's `code` (ESOCKET, ELOGIN, EREQUEST, …), looking through wrappers like {@link driverErrorNumber}. */
export function driverErrorCode(error: unknown): string | undefined {
  for (let current = asShape(error), depth = 0; current && depth < 5; depth++) {
    if (typeof current.code === 'string' && current.code !== 'EREQUEST') return current.code;
    current = asShape(current.cause) ?? asShape(current.originalError);
  }
  return undefined;
}

/**
 * Whether `error` (raw or already translated) is a deadlock-victim error: error 1205, or an outbox key lock that
 * `sp_getapplock` refused with -3 (deadlock victim), which the store raises as a `StoreError` with
 * `context.appLockStatus` -3.
 */
export function isDeadlock(error: unknown): boolean {
  if (error instanceof QueueBoxError && error.context.appLockStatus === APPLOCK_DEADLOCK_STATUS) return true;
  return driverErrorNumber(error) === DEADLOCK_VICTIM;
}

/** Whether `error` (raw or already translated) is error 1222: a lock wait ran out of LOCK_TIMEOUT. */
export function isLockTimeout(error: unknown): boolean {
  return driverErrorNumber(error) === LOCK_TIMEOUT;
}

/**
 * `message` without the value SQL Server quotes in error 2628 ("… in table 'db.queuebox.outbox', column 'topic'.
 * Truncated value: '…'."): that value is application data (a key, a payload excerpt) and must not reach messages
 * and logs. The server sends the text in the session's language (sys.messages holds it per language; the login's
 * default language, `SET LANGUAGE`, or `Current Language=` in an ADO.NET string, which mssql passes on as tedious's
 * `language`), so the English label is not always there, and a value may hold the label's text itself. In every
 * language the message quotes the table, the column and then the value, in that order (its three `%.*ls`
 * arguments): it is cut after the fourth quote, the column's closing one, so whatever follows (the value and its
 * label, in any language) is dropped. The table
 * and column names are the store's own, which hold no quote; a quote in the database name only makes the cut come
 * earlier. A message with fewer than four quotes keeps none of its text.
 */
export function withoutTruncatedValue(message: string): string {
  let quote = -1;
  for (let n = 0; n < 4; n++) {
    quote = message.indexOf("'", quote + 1);
    if (quote < 0) return 'String or binary data would be truncated (error 2628)';
  }
  return `${message.slice(0, quote + 1)}.`;
}

/** Whether `error` (raw or already translated) is a violation of a unique index or constraint. */
export function isUniqueViolation(error: unknown): boolean {
  const number = driverErrorNumber(error);
  return number !== undefined && UNIQUE_VIOLATIONS.has(number);
}

/** Whether `error` says the server or the connection is unavailable (see {@link TRANSIENT_ERROR_NUMBERS}). */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return true;
  const shape = asShape(error);
  if (!shape) return false;
  // mssql's ConnectionError, and tarn's pool acquire timeout: the pool could not give us a connection.
  if (shape.name === 'ConnectionError' || shape.name === 'TimeoutError') return true;
  const code = driverErrorCode(error);
  if (code !== undefined && UNAVAILABLE_CODES.has(code)) return true;
  const number = driverErrorNumber(error);
  return number !== undefined && TRANSIENT_ERROR_NUMBERS.has(number);
}

/**
 * Translates a driver error into core's errors: `StoreUnavailableError` when the server cannot be reached, went
 * away or is throttling (mssql `ConnectionError`, codes in {@link UNAVAILABLE_CODES}, numbers in
 * {@link TRANSIENT_ERROR_NUMBERS}), `StoreError` for anything else — a deadlock victim that ran out of retries
 * included; with `context.transientConflict` for a deadlock victim and the numbers of
 * {@link TRANSIENT_CONFLICT_NUMBERS} (a lock wait that ran out, a full lock table, memory, log or disk). The driver error is the `cause`; `context.number` / `context.code` carry its SQL Server error number
 * and driver code. QueueBox errors pass through unchanged. Parameters are never copied into the error: they may
 * hold payloads.
 */
export function translateError(error: unknown): QueueBoxError {
  if (error instanceof QueueBoxError) return error;
  const number = driverErrorNumber(error);
  const code = driverErrorCode(error);
  if (number === TRUNCATION) return truncationError(error, code);
  const detail = error instanceof Error ? error.message || error.name : String(error);
  const context: Record<string, unknown> = {};
  if (number !== undefined) context.number = number;
  if (code !== undefined) context.code = code;
  if (refusesValues(number)) context.valueRefused = true;
  if (number === LOGIN_FAILED || (code === 'ELOGIN' && isLoginFailedText(detail)))
    context.credentialsRefused = true;
  if (isUnavailable(error)) {
    return new StoreUnavailableError(`The database is unavailable: ${detail}`, { cause: error, context });
  }
  if (number === DEADLOCK_VICTIM) {
    // Run again, it goes through: a fenced write is tried again (core's `isTransientConflict`).
    return new StoreError(`The statement was chosen as a deadlock victim too many times: ${detail}`, {
      cause: error,
      context: { ...context, transientConflict: true },
    });
  }
  if (number !== undefined && TRANSIENT_CONFLICT_NUMBERS.has(number)) context.transientConflict = true;
  return new StoreError(`A database statement failed: ${detail}`, { cause: error, context });
}

/**
 * Error 2628 without the truncated value: neither the message nor the `cause` (which logs print) carries the
 * driver error's text, only its name, number and code and the message up to the quoted value.
 */
function truncationError(error: unknown, code: string | undefined): StoreError {
  const raw = error instanceof Error ? error.message : String(error);
  const detail = withoutTruncatedValue(raw);
  const cause = Object.assign(new Error(detail), {
    name: error instanceof Error ? error.name : 'RequestError',
    number: TRUNCATION,
    ...(code !== undefined ? { code } : {}),
  });
  const context: Record<string, unknown> = { number: TRUNCATION, valueRefused: true };
  if (code !== undefined) context.code = code;
  return new StoreError(`A database statement failed: ${detail}`, { cause, context });
}
