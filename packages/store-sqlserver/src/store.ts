import {
  ConfigError,
  type Logger,
  type MigrationReport,
  onceInstallId,
  type Store,
  withMessageIds,
} from '@queuebox/core';
import mssql from 'mssql';
import { createSqlServerAdminStore } from './admin-store.ts';
import { parseConnectionString } from './connection-string.ts';
import { createSqlServerExecutor, type SqlExecutor } from './executor.ts';
import { createSqlServerInboxStore } from './inbox-store.ts';
import { readInstallId } from './install-id.ts';
import { runMigrations } from './migrator.ts';
import { createSqlServerOutboxStore } from './outbox-store.ts';
import { DEFAULT_SCHEMA, quoteSchema } from './schema-name.ts';
import { checkServerSettings, type SettingsWarning, settingsWarnings } from './settings.ts';

/** Options of {@link createSqlServerStore}. */
export interface SqlServerStoreOptions {
  /** Where the statements run; the store owns it and `close()` closes it. */
  readonly executor: SqlExecutor;
  /** Schema of both tables. Default `queuebox`. */
  readonly schema?: string;
  /**
   * Where the store's warnings about the database's settings go (READ_COMMITTED_SNAPSHOT off), with `code` and
   * `setting` fields. Default: Node's `process.emitWarning`, which prints to stderr, because the callers that open
   * the store (`@queuebox/store`'s `openStore`) pass no logger yet.
   */
  readonly logger?: Pick<Logger, 'warn'>;
}

/** Default of {@link SqlServerStoreOptions.logger}: a Node process warning of type `QueueBoxWarning`. */
export const processWarnings: Pick<Logger, 'warn'> = {
  warn(message, fields) {
    const code = typeof fields?.code === 'string' ? fields.code : undefined;
    process.emitWarning(message, { type: 'QueueBoxWarning', ...(code ? { code } : {}) });
  },
};

/**
 * core's `Store` (provider `sqlserver`) over an executor: the outbox and inbox repositories, the migrator
 * (embedded migrations of migrations/sqlserver) and a ping. Nothing is migrated until `migrate()` is called.
 * Throws `ConfigError` for an invalid schema name.
 *
 * Before the repositories' first statement, and at the start of `migrate()`, the store reads the database's
 * settings (`checkServerSettings`): a compatibility level below 130 or an enabled trigger on either table fails
 * that call with a `StoreError` that says what to change; the check runs again on the next call until it passes.
 * The first check that passes also tells `logger` once what a setting the store works under costs
 * (`settingsWarnings`: READ_COMMITTED_SNAPSHOT off stalls outbox claims behind open application transactions).
 * `ping()` does not wait for it.
 *
 * The outbox's claims answer each row with its message id (`withMessageIds`): the schema's install id (migration
 * 0005), read before the first claim and kept, and the row id. Before migration 0005 a claim fails with a
 * `StoreError` that says to migrate, and claims nothing.
 */
export function createSqlServerStore(options: SqlServerStoreOptions): Store {
  const { executor } = options;
  const schema = options.schema ?? DEFAULT_SCHEMA;
  quoteSchema(schema);
  const logger = options.logger ?? processWarnings;
  let warned = false;
  const warn = (warnings: readonly SettingsWarning[]): void => {
    if (warned) return;
    warned = true;
    for (const { message, code, setting } of warnings) logger.warn(message, { code, setting });
  };
  let checked: Promise<unknown> | undefined;
  const settingsChecked = (): Promise<unknown> => {
    checked ??= checkServerSettings(executor, schema).then(
      (settings) => warn(settingsWarnings(settings)),
      (error: unknown) => {
        checked = undefined;
        throw error;
      },
    );
    return checked;
  };
  const repositories: SqlExecutor = {
    async query(text, values, queryOptions) {
      await settingsChecked();
      return executor.query(text, values, queryOptions);
    },
    async transaction(fn) {
      await settingsChecked();
      return executor.transaction(fn);
    },
    close: () => executor.close(),
  };
  const installId = onceInstallId(() => readInstallId(repositories, schema));
  return {
    provider: 'sqlserver',
    outbox: withMessageIds(createSqlServerOutboxStore({ executor: repositories, schema }), installId),
    inbox: createSqlServerInboxStore({ executor: repositories, schema }),
    admin: createSqlServerAdminStore({ executor: repositories, schema }),
    async migrate(options = {}): Promise<MigrationReport> {
      checked = undefined;
      await settingsChecked();
      return runMigrations(executor, { schema, ...options });
    },
    installId,
    async ping(): Promise<void> {
      await executor.query('SELECT 1 AS ok;');
    },
    close: () => executor.close(),
  };
}

/** Options of {@link openSqlServerStore}. */
export interface OpenSqlServerStoreOptions {
  /**
   * `sqlserver://user:password@host:1433/database?encrypt=true` (or `mssql://`), or an ADO.NET connection string
   * (`Server=host,1433;Database=app;User Id=…;Password=…`). See parseConnectionString.
   */
  readonly url: string;
  /** Schema of both tables. Default `queuebox`. */
  readonly schema?: string;
  /** Most connections in the pool. Default 10. */
  readonly poolSize?: number;
  /** Where warnings about the database's settings go. Default: `process.emitWarning` (see createSqlServerStore). */
  readonly logger?: Pick<Logger, 'warn'>;
  /**
   * Longest wait to open a connection, in ms (`database.connectTimeoutMs`): mssql's `connectionTimeout`. A
   * `connectTimeout` the url names (`Connect Timeout` in an ADO.NET string) wins. Default: that, else mssql's 15000.
   */
  readonly connectTimeoutMs?: number;
  /**
   * Longest wait for a statement's answer, in ms, 0 without limit (`database.queryTimeoutMs`): mssql's
   * `requestTimeout`; past it the request fails as an outage (ETIMEOUT) and tedious asks the server to cancel it.
   * Statements that set their own (migrations: none) keep theirs. A `requestTimeout` the url names wins. Default:
   * that, else mssql's 15000.
   */
  readonly queryTimeoutMs?: number;
}

/** Default of {@link OpenSqlServerStoreOptions.poolSize}. */
export const DEFAULT_POOL_SIZE = 10;

/**
 * A store on SQL Server through an mssql pool. It does not connect yet: the pool connects on first use (and
 * again after a failure), so this resolves without touching the server; call `ping()` to check it (an outage is
 * `StoreUnavailableError`). A malformed URL, schema name or pool size fails here with `ConfigError`. Does not
 * migrate.
 */
export async function openSqlServerStore(options: OpenSqlServerStoreOptions): Promise<Store> {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  quoteSchema(schema);
  const config = parseConnectionString(options.url);
  const poolSize = options.poolSize ?? DEFAULT_POOL_SIZE;
  if (!Number.isInteger(poolSize) || poolSize < 1) {
    throw new ConfigError([
      { path: 'database.poolSize', message: `${poolSize} is not a positive whole number` },
    ]);
  }
  // The url's own timeouts win: they were the only way to set them before the configuration's were passed on, and
  // the configuration fills its defaults in, so a url that names one is the more deliberate choice.
  const connectionTimeout = config.connectionTimeout ?? options.connectTimeoutMs;
  const requestTimeout = config.requestTimeout ?? options.queryTimeoutMs;
  // Pinned on the pool too (tedious sets it at login): READPAST needs READ COMMITTED (see outbox-sql.ts TAKE_BEGIN).
  const pool = new mssql.ConnectionPool({
    ...config,
    ...(connectionTimeout === undefined ? {} : { connectionTimeout }),
    ...(requestTimeout === undefined ? {} : { requestTimeout }),
    options: { ...config.options, isolationLevel: mssql.ISOLATION_LEVEL.READ_COMMITTED },
    pool: { ...config.pool, min: 0, max: poolSize },
  });
  return createSqlServerStore({
    executor: createSqlServerExecutor(pool),
    schema,
    ...(options.logger ? { logger: options.logger } : {}),
  });
}
