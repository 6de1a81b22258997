/**
 * The pull API for applications: the inbox package's pull worker over a store that this module opens from a
 * connection URL. The worker itself (claim, markProcessed, retry, markDead, ClaimLostError) is @queuebox/inbox's.
 */
import { ConfigError, type Store } from '@queuebox/core';
import { createPullWorker, type PullWorker } from '@queuebox/inbox';
import { schemaOf } from './enqueue.ts';

/** Longest source name (the inbox `source` column is VARCHAR/NVARCHAR(200)). */
export const MAX_SOURCE_LENGTH = 200;

/** Options of `openPullWorker`. */
export interface OpenPullWorkerOptions {
  /**
   * The database QueueBox runs on: `postgres://…` / `postgresql://…` (through `pg`), or `sqlserver://…` /
   * `mssql://…` or an ADO.NET connection string `Server=…;Database=…;…` (through `mssql`).
   */
  readonly url: string;
  /** Schema of the QueueBox tables. Default `queuebox`. */
  readonly schema?: string;
  /** The pull source (`sources.<name>` with `mode: pull`) whose inbox rows the worker claims. */
  readonly source: string;
  /** Most connections of the worker's pool. Default 10 (the stores' default). */
  readonly poolSize?: number;
  /**
   * PostgreSQL only: longest wait to open a connection (or for a free pooled one), in ms. Default 30000. (SQL
   * Server: `connectTimeout` in the url; mssql's default 15000.)
   */
  readonly connectTimeoutMs?: number;
  /**
   * PostgreSQL only: longest wait for a statement's answer, in ms, before it fails as `StoreUnavailableError` and
   * its connection is dropped; 0 waits without limit. Default 30000. (SQL Server: `requestTimeout` in the url.)
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

/**
 * Opens a pull worker for one pull source: a store on `url` (a pool that connects on first use, so this resolves
 * without touching the database) and @queuebox/inbox's `createPullWorker` over its inbox. It does not migrate —
 * QueueBox's own deployment does.
 *
 * - `claim(n, leaseMs)`: pending → processing for up to `n` due rows of the source, and takeover of rows whose
 *   lease expired (a new claim token, counting an attempt).
 * - `markProcessed(row)`: processing → processed. `retry(row, delayMs, error)`: back to pending after `delayMs`,
 *   counting an attempt. `markDead(row, reason)`: processing → dead.
 * - Every settle is fenced by the row's claim token and throws `ClaimLostError` when the claim was lost (its
 *   lease expired and another claim took the row): stop working on that row.
 *
 * Throws `ConfigError` for an unknown URL scheme, an invalid schema name or an empty or over-long source.
 */
export async function openPullWorker(options: OpenPullWorkerOptions): Promise<PullClient> {
  const schema = schemaOf(options);
  const { source } = options;
  if (typeof source !== 'string' || source.length === 0 || source.length > MAX_SOURCE_LENGTH) {
    throw new ConfigError([
      { path: 'source', message: `must be a source name of 1 to ${MAX_SOURCE_LENGTH} characters` },
    ]);
  }
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
