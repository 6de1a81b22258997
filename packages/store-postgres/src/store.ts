import { readdir } from 'node:fs/promises';
import type { PGlite as PGliteInstance } from '@electric-sql/pglite';
import type { Store } from '@queuebox/core';
import {
  errorFields,
  onceInstallId,
  parseJsonText,
  StoreError,
  StoreUnavailableError,
  withMessageIds,
} from '@queuebox/core';
import pg from 'pg';
import { createPostgresAdminStore } from './admin-store.ts';
import { createDataApiExecutor, type DataApiTarget } from './data-api-executor.ts';
import { createPgExecutor, createPgliteExecutor, type SqlExecutor } from './executor.ts';
import { createPostgresInboxStore } from './inbox-store.ts';
import { readInstallId } from './install-id.ts';
import { runMigrations } from './migrator.ts';
import { createPostgresOutboxStore } from './outbox-store.ts';
import { lockDataDir } from './pglite-lock.ts';
import { DEFAULT_SCHEMA, quoteSchema } from './schema-name.ts';
import { readTimestamptz, TIMESTAMPTZ_OID } from './timestamptz.ts';

/**
 * The bounds of the inbox's group commit (`inbox-batch.ts`), the same on every executor: how long a webhook's store
 * may wait for its answer and how many may wait for a statement. Past either the store fails with
 * `StoreUnavailableError` (the ingestion's 503 `store_unavailable`, with Retry-After) instead of queueing without
 * limit behind inserts that block.
 */
export interface InboxQueueOptions {
  /**
   * Longest wait of an inbox `store` for its answer, in the queue and then in its statement, in ms; 0 waits without
   * limit (up to the statement's own timeout). A store still queued at its deadline is never written; one whose
   * statement already runs may still commit (the sender's retry is then a duplicate). Default 25000.
   */
  readonly inboxMaxWaitMs?: number;
  /** Most inbox `store` calls waiting for a statement; one more fails at once. Default 2000. */
  readonly inboxMaxQueued?: number;
}

/** The inbox store's options from {@link InboxQueueOptions}. */
function inboxQueue(options: InboxQueueOptions): { maxWaitMs?: number; maxQueued?: number } {
  return {
    ...(options.inboxMaxWaitMs === undefined ? {} : { maxWaitMs: options.inboxMaxWaitMs }),
    ...(options.inboxMaxQueued === undefined ? {} : { maxQueued: options.inboxMaxQueued }),
  };
}

/** Only the {@link InboxQueueOptions} of `options`, to hand on to `createPostgresStore`. */
function inboxQueueOf(options: InboxQueueOptions): InboxQueueOptions {
  return {
    ...(options.inboxMaxWaitMs === undefined ? {} : { inboxMaxWaitMs: options.inboxMaxWaitMs }),
    ...(options.inboxMaxQueued === undefined ? {} : { inboxMaxQueued: options.inboxMaxQueued }),
  };
}

/** Options of `createPostgresStore`. */
export interface PostgresStoreOptions extends InboxQueueOptions {
  /** Where the statements go; the store owns it (`close()` closes it). */
  readonly executor: SqlExecutor;
  /** Schema of both tables. Default `queuebox`; must match `^[A-Za-z_][A-Za-z0-9_]{0,62}$`. */
  readonly schema?: string;
  /** What `store.provider` reports. Default `postgres` (also for the Data API). */
  readonly provider?: 'postgres' | 'pglite';
  /** Most distinct keys one outbox claim visits. Default 1000. */
  readonly keyScanLimit?: number;
  /**
   * Whether the executor keeps sessions in a pool (`pg`): `ping()` then runs its check in a transaction of its own,
   * so that a session it finds on a standby or read-only is thrown away instead of going back to the pool (an outside
   * failover audit: a runtime started while the endpoint reached a standby reused that one session at every ping, 5 s
   * apart, under the pool's 30 s idle limit, and never started after the endpoint moved to the writer). Default false
   * (the Data API keeps no session; PGlite is one).
   */
  readonly pooledSessions?: boolean;
}

/**
 * core's `Store` over an executor: the outbox and inbox repositories, the migrator (embedded migrations of
 * migrations/postgres) and a ping. Nothing is migrated until `migrate()` is called. Throws `ConfigError` for an
 * invalid schema name.
 *
 * The outbox's claims answer each row with its message id (`withMessageIds`): the schema's install id (migration
 * 0005), read before the first claim and kept, and the row id. Before migration 0005 a claim fails with a
 * `StoreError` that says to migrate, and claims nothing.
 */
export function createPostgresStore(options: PostgresStoreOptions): Store {
  const { executor } = options;
  const schema = options.schema ?? DEFAULT_SCHEMA;
  quoteSchema(schema);
  const installId = onceInstallId(() => readInstallId(executor, schema));
  const provider = options.provider ?? 'postgres';
  return {
    provider,
    outbox: withMessageIds(
      createPostgresOutboxStore({
        executor,
        schema,
        ...(options.keyScanLimit === undefined ? {} : { keyScanLimit: options.keyScanLimit }),
      }),
      installId,
    ),
    inbox: createPostgresInboxStore({ executor, schema, ...inboxQueue(options) }),
    // PGlite runs no autovacuum: its admin store vacuums what retention deleted from (AdminStore.vacuum).
    admin: createPostgresAdminStore({ executor, schema, vacuum: provider === 'pglite' }),
    migrate: (options = {}) => runMigrations(executor, { schema, ...options }),
    installId,
    ...(provider === 'pglite' ? { releaseClaims: () => releaseClaims(executor, schema) } : {}),
    async ping() {
      // A session on a standby answers SELECT 1 but refuses every write: not ready (a failover in progress). Thrown
      // inside a transaction, the unavailable error makes the executor destroy the session (`pooledSessions`).
      const check = async (on: SqlExecutor) => {
        const { rows } = await on.query<{ standby: boolean; read_only: boolean }>(
          "SELECT pg_catalog.pg_is_in_recovery() AS standby, pg_catalog.current_setting('transaction_read_only') = 'on' AS read_only",
        );
        const answer = rows[0];
        if (answer?.standby === true) {
          throw new StoreUnavailableError(
            'The database is a standby (a failover in progress, or a reader endpoint): QueueBox cannot write to it',
          );
        }
        if (answer?.read_only === true) {
          throw new StoreUnavailableError(
            'The session is read-only: default_transaction_read_only is on for this role or database (ALTER ROLE / ALTER DATABASE ... SET, or PGOPTIONS); QueueBox waits until it is off',
          );
        }
      };
      if (options.pooledSessions === true) await executor.transaction(check);
      else await check(executor);
    },
    close: () => executor.close(),
  };
}

/** `Store.releaseClaims` (PGlite only): the lease of every processing row, outbox and inbox, ends now. */
async function releaseClaims(
  executor: SqlExecutor,
  schema: string,
): Promise<{ outbox: number; inbox: number }> {
  const quoted = quoteSchema(schema);
  const release = async (table: 'outbox' | 'inbox') => {
    const { rowCount } = await executor.query(
      `UPDATE ${quoted}.${table} SET lease_until = pg_catalog.now() - interval '1 millisecond'
       WHERE state = 'processing' AND (lease_until IS NULL OR lease_until >= pg_catalog.now())`,
    );
    return rowCount ?? 0;
  };
  return { outbox: await release('outbox'), inbox: await release('inbox') };
}

/** Default size of the pg pool of `openPostgresStore`. */
export const DEFAULT_POOL_SIZE = 10;

/** Options of `openPostgresStore`. */
export interface OpenPostgresStoreOptions extends InboxQueueOptions {
  /** A PostgreSQL connection string, e.g. `postgres://user@host:5432/db`. */
  readonly url: string;
  /** Default `queuebox`. */
  readonly schema?: string;
  /** Most connections. Default 10. */
  readonly poolSize?: number;
  /** A pooled connection idle longer than this is closed at checkout instead of reused. Default 30000. */
  readonly maxIdleMs?: number;
  /**
   * `false`: no statement runs as a named prepared statement (behind a pooler that pins or drops them). Default
   * true: the light outbox claim does (`createPreparedGuard`).
   */
  readonly preparedStatements?: boolean;
  /**
   * How long opening a connection may take before it fails (`StoreUnavailableError`), and how long a statement
   * waits for a free pooled connection. Default 30000: above the about 15 s that a paused Aurora Serverless v2
   * takes to resume while the connection waits.
   */
  readonly connectTimeoutMs?: number;
  /**
   * How long a statement may go unanswered before it fails and its connection is dropped; 0 waits without limit.
   * Migrations have none. Default 30000 (see `PgExecutorOptions.queryTimeoutMs`).
   */
  readonly queryTimeoutMs?: number;
  /**
   * The `application_name` of the pool's connections (what `pg_stat_activity` shows), unless the URL sets one
   * (`?application_name=…`) or the environment does (`PGAPPNAME`): those win, as it is sent as libpq's
   * `fallback_application_name`. Default {@link DEFAULT_APPLICATION_NAME}.
   */
  readonly applicationName?: string;
}

/** Default of {@link OpenPostgresStoreOptions.applicationName}: the store's connections in `pg_stat_activity`. */
export const DEFAULT_APPLICATION_NAME = 'queuebox';

/**
 * What each connection of the store's pool runs first, over whatever the database, the role, a parameter group or
 * `PGOPTIONS` set:
 * - `DateStyle` ISO: the store reads timestamps as ISO text (`readTimestamptz`, pg's parser); in another style every
 *   timestamp read as nothing, and every claimed row went dead as unreadable. The server reports DateStyle to the
 *   client, so a transaction-mode pooler (PgBouncer) keeps it with the client's connection.
 * - the session's `default_transaction_isolation`, read and never changed (`default_isolation`): the claims (`FOR
 *   UPDATE SKIP LOCKED`), settles and forwards are written for read committed; under repeatable read or serializable
 *   they failed with 40001 under contention, and a settle that failed so left its delivered rows processing for
 *   their lease (delivered again after it, their keys held). Transactions always begin read committed; where the
 *   default differs, the executor runs each single statement in a read committed transaction of its own (two round
 *   trips more). Setting the default on the session instead (session 20) leaked behind a transaction-mode pooler:
 *   the server does not report this setting, so PgBouncer neither carries nor resets it, and every other client of
 *   that server connection (the application's own serializable transactions) ran read committed from then on.
 * DateStyle is set only where the server's differs, so on a server with the usual defaults no session state is
 * changed (nothing for a pooler to carry, nothing that makes RDS Proxy pin the session).
 */
export const SESSION_SETTINGS = `SELECT
  CASE WHEN pg_catalog.current_setting('DateStyle') NOT LIKE 'ISO%' THEN pg_catalog.set_config('DateStyle', 'ISO, MDY', false) END,
  pg_catalog.current_setting('default_transaction_isolation') AS default_isolation`;

/** Default of {@link OpenPostgresStoreOptions.connectTimeoutMs}. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;

const JSON_OID = 114;
const JSONB_OID = 3802;

/**
 * The type parsers of the store's pool (`openPostgresStore`; give them to a pool of your own as `types: {
 * getTypeParser: storeTypeParser }`). pg's own, except two:
 *
 * - json and jsonb keep numbers a double cannot hold as their source text (core's `parseJsonText`): a payload read
 *   back for the relay or a delivery carries the digits that were stored;
 * - timestamptz text is read digit by digit (`readTimestamptz`: the answers of pg's own parser at about a third of
 *   its CPU; a claimed outbox row carries four timestamps).
 *
 * They are the pool's own, so an application that changes pg's global parser of these types does not change the
 * store's rows.
 */
export const storeTypeParser = ((oid: number, format?: 'text' | 'binary') =>
  oid === JSON_OID || oid === JSONB_OID
    ? parseJsonText
    : oid === TIMESTAMPTZ_OID && format !== 'binary'
      ? readTimestamptz
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser;

/**
 * A store on a real PostgreSQL through a `pg` pool (connections open lazily, so this resolves without touching
 * the server; call `ping()` to check it). Does not migrate. Its connections show as `application_name`
 * `queuebox` in `pg_stat_activity` unless the URL (or `PGAPPNAME`) names another (`applicationName`).
 */
export async function openPostgresStore(options: OpenPostgresStoreOptions): Promise<Store> {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  quoteSchema(schema);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? DEFAULT_POOL_SIZE,
    connectionTimeoutMillis: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    // A fallback, not `application_name`: an application_name of the URL (or of PGAPPNAME) is the user's and wins.
    fallback_application_name: options.applicationName ?? DEFAULT_APPLICATION_NAME,
    types: { getTypeParser: storeTypeParser },
  });
  const executor = createPgExecutor(pool, {
    sessionSetup: SESSION_SETTINGS,
    ...(options.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: options.queryTimeoutMs }),
    ...(options.maxIdleMs === undefined ? {} : { maxIdleMs: options.maxIdleMs }),
    ...(options.preparedStatements === undefined ? {} : { namedStatements: options.preparedStatements }),
  });
  return createPostgresStore({
    executor,
    schema,
    provider: 'postgres',
    pooledSessions: true,
    ...inboxQueueOf(options),
  });
}

/**
 * The type parsers of a PGlite under the store (`PGlite.create({ parsers })`): json and jsonb keep numbers a double
 * cannot hold as their source text (core's `parseJsonText`), as `storeTypeParser` does on `pg`.
 */
export const PGLITE_PARSERS: Readonly<Record<number, (text: string) => unknown>> = {
  [JSON_OID]: parseJsonText,
  [JSONB_OID]: parseJsonText,
};

/** Options of `openPgliteStore`. */
export interface OpenPgliteStoreOptions extends InboxQueueOptions {
  /** Directory of the database files. Default: none, an in-memory database that is gone on close. */
  readonly dataDir?: string;
  /** Default `queuebox`. */
  readonly schema?: string;
}

/**
 * A store on the embedded PGlite (PostgreSQL in WebAssembly, one session, start-up of a few seconds). PGlite is
 * loaded only here, so a process on a real server never loads it. A `dataDir` is locked for this store until it
 * closes (`lockDataDir`): a second opener, in this process or another, fails with `StoreUnavailableError` naming the
 * holder. Does not migrate.
 */
export async function openPgliteStore(options: OpenPgliteStoreOptions = {}): Promise<Store> {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  quoteSchema(schema);
  const { PGlite } = await import('@electric-sql/pglite');
  const parsers = PGLITE_PARSERS;
  if (options.dataDir === undefined) {
    const db = await PGlite.create({ parsers });
    return createPostgresStore({
      executor: createPgliteExecutor(db),
      schema,
      provider: 'pglite',
      ...inboxQueueOf(options),
    });
  }
  const lock = await lockDataDir(options.dataDir);
  let db: PGliteInstance | undefined;
  try {
    await refuseForeignDirectory(options.dataDir);
    try {
      db = await PGlite.create({ dataDir: options.dataDir, parsers });
    } catch (error) {
      // PGlite's own failures on damaged files say `RuntimeError: Aborted()` and no more.
      throw new StoreError(
        `PGlite could not open its data directory ${options.dataDir}: ${errorFields(error).message}. Its files may be damaged: restore the directory from a copy, or move it aside to start with an empty database`,
        { cause: error },
      );
    }
    return createPostgresStore({
      executor: createPgliteExecutor(db, lock),
      schema,
      provider: 'pglite',
      ...inboxQueueOf(options),
    });
  } catch (error) {
    await db?.close().catch(() => undefined);
    await lock.release();
    throw error;
  }
}

/**
 * Refuses a data directory that holds files but no `PG_VERSION`: PGlite would create a new database in it, and
 * the rows of a damaged one (or whatever else the directory held) would be gone without a word.
 */
async function refuseForeignDirectory(dataDir: string): Promise<void> {
  // What a mounted volume or a desktop puts in any directory (lost+found, .DS_Store) does not count.
  const entries = (await readdir(dataDir).catch(() => [] as string[])).filter(
    (entry) => entry !== 'lost+found' && !entry.startsWith('.'),
  );
  if (entries.length === 0 || entries.includes('PG_VERSION')) return;
  throw new StoreError(
    `The PGlite data directory ${dataDir} holds files but no PG_VERSION: it is not a database directory, or it is damaged. QueueBox does not create a new database over it; restore it from a copy, or point database.dataDir at an empty or new directory`,
  );
}

/** Options of `openDataApiStore`. */
export interface OpenDataApiStoreOptions extends DataApiTarget, InboxQueueOptions {
  /** Default `queuebox`. */
  readonly schema?: string;
  /** AWS region of the cluster. Default: the SDK's (`AWS_REGION` on Lambda). */
  readonly region?: string;
  /** Another endpoint than `rds-data.<region>.amazonaws.com` (a VPC endpoint, or a local one in tests). */
  readonly endpoint?: string;
  /** Static credentials (tests). Default: the SDK's provider chain (the function's role on Lambda). */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** Longest wait for a paused cluster to resume, per call. Default 25000 ms. */
  readonly resumeTimeoutMs?: number;
  /** Connect timeout of each HTTPS call. Default 5000 ms. */
  readonly connectTimeoutMs?: number;
  /** Longest time one call may take (the Data API's own limit is 45 s). Default 45000 ms. */
  readonly requestTimeoutMs?: number;
  /** Told before each wait for a resuming cluster. */
  readonly onResuming?: (attempt: number, waitMs: number) => void;
}

/**
 * A store on Aurora PostgreSQL through the RDS Data API (`database.dataApi`): no connection and no VPC, each
 * statement one HTTPS call (see `createDataApiExecutor`). The SDK client is built with `maxAttempts: 1`, because
 * the SDK would retry a timed-out or 5xx call that the database may already have run (an insert would then go in
 * twice); only `DatabaseResumingException` is retried, which the service answers without running anything.
 * Keep-alive sockets carry the calls. Loads `@aws-sdk/client-rds-data` only here. Does not migrate.
 */
export async function openDataApiStore(options: OpenDataApiStoreOptions): Promise<Store> {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  quoteSchema(schema);
  const [{ RDSDataClient }, http, https] = await Promise.all([
    import('@aws-sdk/client-rds-data'),
    import('node:http'),
    import('node:https'),
  ]);
  const client = new RDSDataClient({
    maxAttempts: 1,
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    ...(options.credentials === undefined ? {} : { credentials: { ...options.credentials } }),
    requestHandler: {
      connectionTimeout: options.connectTimeoutMs ?? 5000,
      requestTimeout: options.requestTimeoutMs ?? 45_000,
      httpAgent: new http.Agent({ keepAlive: true, maxSockets: 50 }),
      httpsAgent: new https.Agent({ keepAlive: true, maxSockets: 50 }),
    },
  });
  const executor = createDataApiExecutor({
    client,
    resourceArn: options.resourceArn,
    secretArn: options.secretArn,
    ...(options.database === undefined ? {} : { database: options.database }),
    ...(options.resumeTimeoutMs === undefined ? {} : { resumeTimeoutMs: options.resumeTimeoutMs }),
    ...(options.onResuming === undefined ? {} : { onResuming: options.onResuming }),
  });
  return createPostgresStore({ executor, schema, provider: 'postgres', ...inboxQueueOf(options) });
}
