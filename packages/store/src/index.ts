import { ConfigError, type Store } from '@queuebox/core';

/** The `database` section of the configuration, as `openStore` needs it. */
export interface DatabaseOptions {
  /** `postgres` (a server, through `pg`), `pglite` (embedded PostgreSQL) or `sqlserver` (through `mssql`). */
  readonly provider: 'postgres' | 'pglite' | 'sqlserver';
  /** Connection string; required for `postgres` and `sqlserver`, ignored by `pglite`. */
  readonly url?: string;
  /** Schema of both tables. Default `queuebox`. */
  readonly schema?: string;
  /** Most connections of the pool (`postgres`, `sqlserver`). Default 10. */
  readonly poolSize?: number;
  /**
   * `postgres` with `url` only: `false` runs no statement as a named prepared statement (behind a pooler that pins
   * or drops them). Default true.
   */
  readonly preparedStatements?: boolean;
  /**
   * `postgres` with `url`, and `sqlserver` (mssql's `connectionTimeout`; a `connectTimeout` in its url wins): longest
   * wait to open a connection, in ms. Default 30000.
   */
  readonly connectTimeoutMs?: number;
  /**
   * `postgres` with `url` (the connection is then dropped), and `sqlserver` (mssql's `requestTimeout`; a
   * `requestTimeout` in its url wins): longest wait for a statement's answer, in ms (0: no limit). Default 30000.
   */
  readonly queryTimeoutMs?: number;
  /** PGlite's data directory. Default: none, an in-memory database (`pglite` only). */
  readonly dataDir?: string;
  /**
   * `postgres` only: reach Aurora PostgreSQL through the RDS Data API instead of `url` (no connection, no VPC).
   * Default: none.
   */
  readonly dataApi?: {
    readonly resourceArn: string;
    readonly secretArn: string;
    readonly database?: string;
    readonly resumeTimeoutMs?: number;
  };
}

/**
 * Default of `connectTimeoutMs` and `queryTimeoutMs` for SQL Server, 30000 ms: the configuration's, which
 * store-postgres applies on its own (`DEFAULT_CONNECT_TIMEOUT_MS`, `DEFAULT_QUERY_TIMEOUT_MS`).
 */
export const DEFAULT_DATABASE_TIMEOUT_MS = 30_000;

function requireUrl(database: DatabaseOptions): string {
  if (!database.url) {
    throw new ConfigError([
      { path: 'database.url', message: `is required for provider ${database.provider}` },
    ]);
  }
  return database.url;
}

/**
 * Opens the store of the configured provider. The provider package is loaded here, at run time, by a dynamic
 * `import()` with a literal specifier (docs/design.md §4): bundlers still see both providers and put them into every
 * bundle that touches the database, while a process only loads the one it uses. Nothing is migrated; call
 * `store.migrate()` where the deployment migrates. Throws `ConfigError` for a missing url or an unknown provider.
 */
export async function openStore(database: DatabaseOptions): Promise<Store> {
  const schema = database.schema === undefined ? {} : { schema: database.schema };
  const poolSize = database.poolSize === undefined ? {} : { poolSize: database.poolSize };
  switch (database.provider) {
    case 'postgres': {
      if (database.dataApi !== undefined) {
        const { openDataApiStore } = await import('@queuebox/store-postgres');
        return openDataApiStore({ ...database.dataApi, ...schema });
      }
      const url = requireUrl(database);
      const { openPostgresStore } = await import('@queuebox/store-postgres');
      const { preparedStatements, connectTimeoutMs, queryTimeoutMs } = database;
      return openPostgresStore({
        url,
        ...schema,
        ...poolSize,
        ...(preparedStatements === undefined ? {} : { preparedStatements }),
        ...(connectTimeoutMs === undefined ? {} : { connectTimeoutMs }),
        ...(queryTimeoutMs === undefined ? {} : { queryTimeoutMs }),
      });
    }
    case 'pglite': {
      const { openPgliteStore } = await import('@queuebox/store-postgres');
      return openPgliteStore({
        ...schema,
        ...(database.dataDir === undefined ? {} : { dataDir: database.dataDir }),
      });
    }
    case 'sqlserver': {
      const url = requireUrl(database);
      const { openSqlServerStore } = await import('@queuebox/store-sqlserver');
      // Passed on, with the defaults of the configuration: they were accepted and dropped, leaving mssql's 15 s.
      return openSqlServerStore({
        url,
        ...schema,
        ...poolSize,
        connectTimeoutMs: database.connectTimeoutMs ?? DEFAULT_DATABASE_TIMEOUT_MS,
        queryTimeoutMs: database.queryTimeoutMs ?? DEFAULT_DATABASE_TIMEOUT_MS,
      });
    }
    default:
      throw new ConfigError([
        {
          path: 'database.provider',
          message: `${JSON.stringify((database as { provider: unknown }).provider)} is not one of postgres, pglite, sqlserver`,
        },
      ]);
  }
}

export { type EmbeddedMigrationText, embeddedMigrations, migrationsHash } from './migrations.ts';
