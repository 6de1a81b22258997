/**
 * The pull API for applications: the inbox package's pull worker over a store that this module opens from a
 * connection URL. The worker itself (claim, markProcessed, retry, markDead, ClaimLostError) is @queuebox/inbox's.
 *
 * Its types are restated here rather than re-exported, and its values re-exported under these types, so the
 * client's published declarations never load @queuebox/inbox's: those reach @queuebox/transform's, which need
 * `jsonata` installed (an application type-checking with `skipLibCheck: false` would fail on it). The values are
 * the inbox's own (`ClaimLostError` is the very class its worker throws, so `instanceof` works), and the
 * assignments below fail to compile when the inbox's API drifts from what is stated here.
 */
import {
  ConfigError,
  type ConfigIssue,
  type InboxRow,
  type InboxStore,
  type QueueBoxError,
  type RowClaim,
  type RowId,
  type Store,
} from '@queuebox/core';
import * as inbox from '@queuebox/inbox';
import { schemaOf } from './enqueue.ts';

/** Longest source name (the inbox `source` column is VARCHAR/NVARCHAR(200); the configuration allows no longer). */
export const MAX_SOURCE_LENGTH = 200;

/**
 * What a source name is: the configuration's rule for the names under `sources:` (@queuebox/config's
 * NAME_PATTERN). A name outside it cannot name a configured source, so its worker would claim nothing, forever.
 */
export const SOURCE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$/;

/** Largest `poolSize` (the configuration's `database.poolSize` limit). */
export const MAX_POOL_SIZE = 1000;

/** Longest `connectTimeoutMs` / `queryTimeoutMs`: the longest timer Node.js keeps (about 24.8 days). */
export const MAX_TIMEOUT_MS = 2_147_483_647;

/** A row claimed by a pull worker: the claim token is always set. */
export type ClaimedInboxRow = InboxRow & { readonly claimToken: string };

/**
 * What `retry` takes: the claimed row. With its `attempt` and `maxAttempts` (a `ClaimedInboxRow` has both) the
 * worker decides pending or dead from them; with only `{ id, claimToken }` it reads them from the database first.
 */
export type RetryRow = RowClaim & { readonly attempt?: number; readonly maxAttempts?: number };

/** What `retry` did: `pending` (retried after the delay) or `dead` (no attempt remained: the worker gave up). */
export type RetryOutcome = 'pending' | 'dead';

/** Dependencies of `createPullWorker`. */
export interface PullWorkerDeps {
  readonly store: InboxStore;
  /** The pull source whose rows the worker claims. */
  readonly source: string;
}

/**
 * The pull API over one source (@queuebox/inbox's `PullWorker`). Every settle is fenced by the claim token and
 * throws `ClaimLostError` when the claim is no longer the row's current one.
 *
 * Attempts: `row.attempt` counts the tries of the row that failed before this claim — a `retry`, and a claim whose
 * lease expired unsettled (its worker crashed, was killed or stalled). The row has `maxAttempts` tries in all: a
 * `retry` that uses the last one sends the row dead, and a claim never hands out a row with none left.
 */
export interface PullWorker {
  /**
   * Up to `n` rows, held for `leaseMs`: pending → processing for due rows, oldest first. A row whose lease expired
   * is taken over first (processing → processing with a new claim token, counting an attempt) and alone: such a
   * claim answers only that row, so a row that crashed its worker is retried by itself and the other rows of the
   * crashed batch each on their own. A row whose attempts are all used up (`attempt >= maxAttempts`, as after
   * repeated crashes on it) is never answered: the worker gives up on it (processing → dead, `no attempt remains …`
   * in last_error) and claims on. `n`: a whole number from 1 to {@link MAX_CLAIM_ROWS}; `leaseMs`: more than 0, at
   * most {@link MAX_PULL_DELAY_MS}; otherwise a RangeError before any statement.
   */
  claim(n: number, leaseMs: number): Promise<ClaimedInboxRow[]>;
  /** processing → processed: the work is done. */
  markProcessed(row: RowClaim): Promise<void>;
  /**
   * A failed try, counting an attempt, `error` kept as last_error: processing → pending, due after `delayMs`, while
   * an attempt remains (`'pending'`); processing → dead when this was the last one (`row.attempt + 1 >=
   * row.maxAttempts`: the worker gives up; `'dead'`). `delayMs`: 0 to {@link MAX_PULL_DELAY_MS}, else a
   * RangeError before any statement.
   */
  retry(row: RetryRow, delayMs: number, error: string): Promise<RetryOutcome>;
  /** processing → dead with `reason`. */
  markDead(row: RowClaim, reason: string): Promise<void>;
}

/**
 * The claim on a row was lost: its lease expired and the row was taken over (or returned by a reclaim) before
 * this settle. The worker must not act as the row's owner any more; the row's new owner will settle it.
 */
export interface ClaimLostError extends QueueBoxError {
  readonly id: RowId;
  readonly source: string;
}

/** The class of {@link ClaimLostError}. */
export interface ClaimLostErrorConstructor {
  new (id: RowId, source: string, operation: string): ClaimLostError;
  readonly prototype: ClaimLostError;
}

/** @queuebox/inbox's `ClaimLostError`: the class its pull worker throws (`error instanceof ClaimLostError`). */
export const ClaimLostError: ClaimLostErrorConstructor = inbox.ClaimLostError;

/** Creates a pull worker for one source over an inbox store (@queuebox/inbox's `createPullWorker`). */
export const createPullWorker: (deps: PullWorkerDeps) => PullWorker = inbox.createPullWorker;

/** Most rows one `claim` may ask for. */
export const MAX_CLAIM_ROWS: number = inbox.MAX_CLAIM_ROWS;

/** Longest lease of a claim and longest delay of a retry, in ms (about 68 years). */
export const MAX_PULL_DELAY_MS: number = inbox.MAX_PULL_DELAY_MS;

/** Options of `openPullWorker`. */
export interface OpenPullWorkerOptions {
  /**
   * The database QueueBox runs on: `postgres://…` / `postgresql://…` (through `pg`), or `sqlserver://…` /
   * `mssql://…` or an ADO.NET connection string `Server=…;Database=…;…` (through `mssql`).
   */
  readonly url: string;
  /** Schema of the QueueBox tables. Default `queuebox`. */
  readonly schema?: string;
  /**
   * The pull source whose inbox rows the worker claims: exactly the name under `sources:` in QueueBox's
   * configuration (`sources.<name>` with `mode: pull`), case included — the rows carry that name. A name the
   * configuration could not hold (`^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$`) is refused; a valid name that no source
   * has claims nothing (the worker cannot see the configuration).
   */
  readonly source: string;
  /** Most connections of the worker's pool: a whole number from 1 to 1000. Default 10 (the stores' default). */
  readonly poolSize?: number;
  /**
   * PostgreSQL only: longest wait to open a connection (or for a free pooled one), in ms: a whole number up to
   * 2147483647; 0 waits without limit. Default 30000. (SQL Server: `connectTimeout` in the url; mssql's default
   * 15000.)
   */
  readonly connectTimeoutMs?: number;
  /**
   * PostgreSQL only: longest wait for a statement's answer, in ms, before it fails as `StoreUnavailableError` and
   * its connection is dropped: a whole number up to 2147483647; 0 waits without limit. Default 30000. (SQL
   * Server: `requestTimeout` in the url.)
   */
  readonly queryTimeoutMs?: number;
}

/** A pull worker that owns its database connections: `close()` ends them. */
export interface PullClient extends PullWorker {
  /** The source it claims from. */
  readonly source: string;
  /** Closes the pool; the worker is unusable afterwards. A claim still held expires with its lease. */
  close(): Promise<void>;
}

/** Which store provider a URL names. */
export function providerOfUrl(url: string): 'postgres' | 'sqlserver' {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'postgres' || scheme === 'postgresql') return 'postgres';
  if (scheme === 'sqlserver' || scheme === 'mssql') return 'sqlserver';
  // ADO.NET: `Server=host,1433;Database=app;…` — only SQL Server is spelled that way here.
  if (scheme === undefined && /^\s*[A-Za-z][A-Za-z ]*=[^;]*;/.test(url)) return 'sqlserver';
  throw new ConfigError([
    {
      path: 'url',
      message: `${scheme === undefined ? 'has no scheme' : `has the scheme ${scheme}://`}; use postgres://, postgresql://, sqlserver://, mssql:// or an ADO.NET connection string (Server=…;Database=…)`,
    },
  ]);
}

async function openStore(options: OpenPullWorkerOptions, schema: string): Promise<Store> {
  const pool = options.poolSize === undefined ? {} : { poolSize: options.poolSize };
  // Each provider is loaded only when its URL is used, so a PostgreSQL application never loads mssql.
  if (providerOfUrl(options.url) === 'postgres') {
    const { openPostgresStore } = await import('@queuebox/store-postgres');
    const { connectTimeoutMs, queryTimeoutMs } = options;
    return openPostgresStore({
      url: options.url,
      schema,
      ...pool,
      ...(connectTimeoutMs === undefined ? {} : { connectTimeoutMs }),
      ...(queryTimeoutMs === undefined ? {} : { queryTimeoutMs }),
    });
  }
  const { openSqlServerStore } = await import('@queuebox/store-sqlserver');
  // The store's READ_COMMITTED_SNAPSHOT warning is about outbox claims, which a pull worker never makes.
  return openSqlServerStore({ url: options.url, schema, ...pool, logger: { warn() {} } });
}

/** `value` as an error message shows it: numbers as they are, anything else by its type. */
function shown(value: unknown): string {
  return typeof value === 'number' ? String(value) : typeof value;
}

/** The problems of `options.source`, `poolSize`, `connectTimeoutMs` and `queryTimeoutMs`. */
function optionIssues(options: OpenPullWorkerOptions): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const { source } = options;
  if (typeof source !== 'string' || !SOURCE_NAME_PATTERN.test(source)) {
    issues.push({
      path: 'source',
      message: `must be the name of a configured source (sources.<name>): 1 to ${MAX_SOURCE_LENGTH} letters, digits, "_" or "-", starting with a letter or digit (got ${typeof source === 'string' ? JSON.stringify(source.slice(0, MAX_SOURCE_LENGTH + 1)) : typeof source})`,
    });
  }
  const whole = (path: keyof OpenPullWorkerOptions, min: number, max: number) => {
    const value = options[path];
    if (value === undefined) return;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
      issues.push({ path, message: `must be a whole number from ${min} to ${max} (got ${shown(value)})` });
  };
  whole('poolSize', 1, MAX_POOL_SIZE);
  whole('connectTimeoutMs', 0, MAX_TIMEOUT_MS);
  whole('queryTimeoutMs', 0, MAX_TIMEOUT_MS);
  return issues;
}

/**
 * Opens a pull worker for one pull source: a store on `url` (a pool that connects on first use, so this resolves
 * without touching the database) and @queuebox/inbox's `createPullWorker` over its inbox. It does not migrate —
 * QueueBox's own deployment does.
 *
 * - `claim(n, leaseMs)`: pending → processing for up to `n` due rows of the source; or the takeover of one row
 *   whose lease expired, alone (a new claim token, counting an attempt). A row with no attempt left is given up
 *   (→ dead), never answered.
 * - `markProcessed(row)`: processing → processed. `retry(row, delayMs, error)`: back to pending after `delayMs`,
 *   counting an attempt — or, when that was the row's last attempt, → dead with `error` (answers `'dead'`).
 *   `markDead(row, reason)`: processing → dead.
 * - Every settle is fenced by the row's claim token and throws `ClaimLostError` when the claim was lost (its
 *   lease expired and another claim took the row): stop working on that row.
 *
 * Throws `ConfigError`, before anything connects, for an unknown URL scheme, an invalid schema name, a source
 * name the configuration could not hold, or a pool size or timeout out of range.
 */
export async function openPullWorker(options: OpenPullWorkerOptions): Promise<PullClient> {
  const schema = schemaOf(options);
  const issues = optionIssues(options);
  if (issues.length > 0) throw new ConfigError(issues);
  const { source } = options;
  providerOfUrl(options.url);
  const store = await openStore(options, schema);
  const worker = createPullWorker({ store: store.inbox, source });
  let closing: Promise<void> | undefined;
  return {
    ...worker,
    source,
    close() {
      closing ??= store.close();
      return closing;
    },
  };
}
