/**
 * The pull API for applications: the inbox package's pull worker over a store that this module opens from a
 * connection URL. The worker itself (claim, markProcessed, retry, markDead, ClaimLostError) is @queuebox/inbox's.
 *
 * Its API (types, `ClaimLostError`, limits) is core's and re-exported from there, and `createPullWorker` is
 * re-exported under core's types, so the client's published declarations never load @queuebox/inbox's: those
 * reach @queuebox/transform's, which need `jsonata` installed (an application type-checking with
 * `skipLibCheck: false` would fail on it).
 */
import {
  ConfigError,
  type ConfigIssue,
  describeValue,
  type PullWorker,
  type PullWorkerDeps,
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

// The pull worker's API (its row, retry and error types, `ClaimLostError`, the limits) is core's, re-exported as it
// is: the class the inbox's worker throws, so `instanceof` works.
export {
  type ClaimedInboxRow,
  ClaimLostError,
  MAX_CLAIM_ROWS,
  MAX_GIVEN_UP_PER_CLAIM,
  MAX_PULL_DELAY_MS,
  type PullWorker,
  type PullWorkerDeps,
  type RetryOutcome,
  type RetryRow,
} from '@queuebox/core';

/** Creates a pull worker for one source over an inbox store (@queuebox/inbox's `createPullWorker`). */
export const createPullWorker: (deps: PullWorkerDeps) => PullWorker = inbox.createPullWorker;

/** Options of `openPullWorker`. */
export interface OpenPullWorkerOptions {
  /**
   * The database QueueBox runs on: `postgres://…` / `postgresql://…` (through `pg`), or `sqlserver://…` /
   * `mssql://…` or an ADO.NET connection string `Server=…;Database=…;…` (through `mssql`).
   */
  readonly url: string;
  /** Schema of the QueueBox tables. Default `queuebox`. */
  readonly schema?: string | undefined;
  /**
   * The pull source whose inbox rows the worker claims: exactly the name under `sources:` in QueueBox's
   * configuration (`sources.<name>` with `mode: pull`), case included — the rows carry that name. A name the
   * configuration could not hold (`^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$`) is refused; a valid name that no source
   * has claims nothing (the worker cannot see the configuration).
   */
  readonly source: string;
  /** Most connections of the worker's pool: a whole number from 1 to 1000. Default 10 (the stores' default). */
  readonly poolSize?: number | undefined;
  /**
   * PostgreSQL only: longest wait to open a connection (or for a free pooled one), in ms: a whole number up to
   * 2147483647; 0 waits without limit. Default 30000. (SQL Server: `connectTimeout` in the url; mssql's default
   * 15000.)
   */
  readonly connectTimeoutMs?: number | undefined;
  /**
   * PostgreSQL only: longest wait for a statement's answer, in ms, before it fails as `StoreUnavailableError` and
   * its connection is dropped: a whole number up to 2147483647; 0 waits without limit. Default 30000. (SQL
   * Server: `requestTimeout` in the url.)
   */
  readonly queryTimeoutMs?: number | undefined;
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

/** The problems of `options.source`, `poolSize`, `connectTimeoutMs` and `queryTimeoutMs`. */
function optionIssues(options: OpenPullWorkerOptions): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const { source } = options;
  if (typeof source !== 'string' || !SOURCE_NAME_PATTERN.test(source)) {
    issues.push({
      path: 'source',
      message: `must be the name of a configured source (sources.<name>): 1 to ${MAX_SOURCE_LENGTH} letters, digits, "_" or "-", starting with a letter or digit (got ${typeof source === 'string' ? JSON.stringify(source.slice(0, MAX_SOURCE_LENGTH + 1)) : describeValue(source)})`,
    });
  }
  const whole = (path: keyof OpenPullWorkerOptions, min: number, max: number) => {
    const value = options[path];
    if (value === undefined) return;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
      issues.push({
        path,
        message: `must be a whole number from ${min} to ${max} (got ${describeValue(value)})`,
      });
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
