/** Options shared by every QueueBox error. */
export interface QueueBoxErrorOptions {
  /** The lower-level error this one explains. */
  cause?: unknown;
  /** Identifiers that help an operator (row ids, source, path). Never secrets. */
  context?: Readonly<Record<string, unknown>>;
}

/** Base of every error QueueBox raises on purpose. */
export class QueueBoxError extends Error {
  readonly context: Readonly<Record<string, unknown>>;

  constructor(message: string, options: QueueBoxErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.context = options.context ?? {};
  }
}

/** A state change that the specification's state tables do not allow. */
export class InvalidTransitionError extends QueueBoxError {
  readonly table: string;
  readonly from: string;
  readonly to: string;

  constructor(table: string, from: string, to: string) {
    super(`The ${table} state table has no transition ${from} → ${to}`, { context: { table, from, to } });
    this.table = table;
    this.from = from;
    this.to = to;
  }
}

/** One problem found in the configuration: where, what, and where the value came from. */
export interface ConfigIssue {
  /** Dotted path of the key, e.g. `outbox.maxAttempts` or `sources.stripe.topic`. */
  readonly path: string;
  readonly message: string;
  /** The file or environment variable the value came from, when known. */
  readonly origin?: string;
}

/** The configuration is not usable; lists every problem found, not only the first. */
export class ConfigError extends QueueBoxError {
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[], options: QueueBoxErrorOptions = {}) {
    const lines = issues.map(
      (i) => `  - ${i.path || '(root)'}: ${i.message}${i.origin ? ` (from ${i.origin})` : ''}`,
    );
    super(
      `Invalid configuration (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${lines.join('\n')}`,
      {
        ...options,
        context: { ...options.context, issues: issues.length },
      },
    );
    this.issues = issues;
  }
}

/** The database cannot be reached or refused the connection; the caller may retry later. */
export class StoreUnavailableError extends QueueBoxError {}

/** A statement failed for a reason other than availability (a bug, a schema mismatch, bad data). */
export class StoreError extends QueueBoxError {}

/**
 * A Lambda event of another shape than the function reads (another event source wired to it, a hand-made test
 * event): the invocation fails instead of answering success for messages it never stored.
 */
export class UnexpectedEventError extends QueueBoxError {}

/** A migration failed; the schema-version table records no version for it. */
export class MigrationError extends QueueBoxError {}

/**
 * An error with an HTTP answer: a status and a stable machine-readable `code`.
 * The message is safe to show to the sender.
 */
export class HttpError extends QueueBoxError {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string, options: QueueBoxErrorOptions = {}) {
    super(message, options);
    this.status = status;
    this.code = code;
  }
}

/** Whether `error`, or an error in its `cause` chain (10 deep at most), is a {@link StoreUnavailableError}. */
export function isStoreUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof StoreUnavailableError) return true;
  }
  return false;
}

/**
 * Whether `error`, or an error in its `cause` chain, is a {@link StoreError} (a statement the database answered with
 * an error, not an outage).
 */
export function isStoreError(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof StoreError) return true;
  }
  return false;
}

/**
 * Whether `error`, or an error in its `cause` chain, is a store error the database gave for the values of the
 * statement (`context.valueRefused`, set by the stores: a data exception, a constraint, a limit, a trigger's own
 * error), so the same row would be refused again: unlike a lock or statement timeout, a deadlock, a full disk or a
 * read-only server, which are the database's moment, not the row's fault.
 */
export function isValueRefused(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof QueueBoxError && e.context.valueRefused === true) return true;
  }
  return false;
}

/**
 * Whether `error`, or an error in its `cause` chain, is the database refusing QueueBox's credentials
 * (`context.credentialsRefused`, set by the stores on a `StoreUnavailableError`: PostgreSQL's SQLSTATE class 28,
 * SQL Server's 18456): a rotated password, most often, which a configuration read anew may already hold.
 */
export function isCredentialsRefused(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof QueueBoxError && e.context.credentialsRefused === true) return true;
  }
  return false;
}

/**
 * Whether `error`, or an error in its `cause` chain, is a store error of a transaction the database ended for a
 * conflict with another (`context.transientConflict`, set by the stores: PostgreSQL's deadlock 40P01 and
 * serialization failure 40001, SQL Server's deadlock victim 1205 past its own retries): run again, the same statement
 * goes through. A fenced write (claim tokens) may be tried again at once, as for an outage.
 */
export function isTransientConflict(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof QueueBoxError && e.context.transientConflict === true) return true;
  }
  return false;
}

/** The answer to a failed HTTP request: a status and a JSON body `{ error: code, message }`. */
export interface ErrorResponse {
  readonly status: number;
  readonly body: { readonly error: string; readonly message: string };
}

/**
 * The one error → response mapper of every HTTP entry point (inbox, admin, the local server, the functions): an
 * {@link HttpError} answers its own status, code and message (safe to show); a {@link StoreUnavailableError}, also
 * as the cause of another error, or a momentary refusal ({@link isTransientConflict}), 503 `store_unavailable`; anything else a bare 500 `internal_error` that leaks
 * nothing of the error.
 */
export function errorResponse(error: unknown): ErrorResponse {
  if (error instanceof HttpError) {
    return { status: error.status, body: { error: error.code, message: error.message } };
  }
  // A statement the database gave up on for the moment (a deadlock, a lock or statement timeout of the role): the
  // sender's retry goes through, as after an outage (it was a 500, an outside audit).
  if (isStoreUnavailable(error) || isTransientConflict(error)) {
    return {
      status: 503,
      body: { error: 'store_unavailable', message: 'The database is unavailable; retry later' },
    };
  }
  return { status: 500, body: { error: 'internal_error', message: 'Internal error' } };
}

/**
 * An error as log fields: its name, message and string `code` (driver error codes), never its stack or statement
 * values (both can quote request data). Anything thrown that is not an Error logs as `Error` with its text.
 */
export function errorFields(error: unknown): { name: string; message: string; code?: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) };
  }
  if (typeof error === 'object' && error !== null) {
    // Not an Error but thrown as one (PGlite's file system throws `{ errno }` objects): its own message, else its
    // descriptive fields, rather than `[object Object]`. Bounded, and never a buffer's bytes.
    if (ArrayBuffer.isView(error) || error instanceof ArrayBuffer) {
      return { name: 'Error', message: Object.prototype.toString.call(error) };
    }
    const { message, name, code } = error as { message?: unknown; name?: unknown; code?: unknown };
    const constructorName = (error as { constructor?: { name?: unknown } }).constructor?.name;
    const identifier = (value: unknown) =>
      typeof value === 'string' && /^[A-Za-z_$][\w$]{0,99}$/.test(value) ? value : undefined;
    return {
      name:
        identifier(name) ??
        (constructorName !== 'Object' ? identifier(constructorName) : undefined) ??
        'Error',
      message: typeof message === 'string' ? clip(message, 2_000) : describeObject(error),
      ...(typeof code === 'string' ? { code: clip(code, 100) } : {}),
    };
  }
  return { name: 'Error', message: String(error) };
}

/** `text` cut to `max` characters, with an ellipsis when cut. */
function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** String fields of a thrown object that say what failed and never hold a secret. */
const DESCRIPTIVE_FIELDS = new Set(['code', 'errno', 'syscall', 'path', 'reason', 'type', 'status']);

/**
 * A thrown object's own number and boolean fields and its descriptive string ones (`DESCRIPTIVE_FIELDS`) as JSON,
 * at most 500 characters (`{"errno":44}`); its tag when it has none. Other fields (and index keys, an array's
 * elements) are left out: an object of unknown shape may carry a credential.
 */
function describeObject(value: object): string {
  const fields: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    if (/^\d+$/.test(key)) continue;
    if (typeof field === 'number' || typeof field === 'boolean') fields[key] = field;
    else if (typeof field === 'string' && DESCRIPTIVE_FIELDS.has(key)) fields[key] = field.slice(0, 200);
  }
  const text = JSON.stringify(fields);
  if (text === '{}') return Object.prototype.toString.call(value);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}
