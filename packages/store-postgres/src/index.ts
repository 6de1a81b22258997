export * from './admin-sql.ts';
export {
  createPostgresAdminStore,
  DEFAULT_REQUEUE_BATCH_SIZE,
  type PostgresAdminStoreOptions,
} from './admin-store.ts';
export {
  createDataApiExecutor,
  type DataApiExecutorOptions,
  type DataApiTarget,
  decodeDataApiResult,
  translateDataApiError,
} from './data-api-executor.ts';
export { type DataApiStatement, splitStatements, toDataApiStatement } from './data-api-sql.ts';
export { translateError } from './errors.ts';
export {
  createPgExecutor,
  createPgliteExecutor,
  createPreparedGuard,
  DEFAULT_QUERY_TIMEOUT_MS,
  type PgExecutorOptions,
  type PreparedGuard,
  type PreparedGuardOptions,
  type QueryOptions,
  type QueryResult,
  type SqlExecutor,
  type Statement,
} from './executor.ts';
export {
  DEFAULT_INBOX_MAX_QUEUED,
  DEFAULT_INBOX_MAX_WAIT_MS,
} from './inbox-batch.ts';
export * from './inbox-claim.ts';
export * from './inbox-dedupe.ts';
export * from './inbox-sql.ts';
export { createPostgresInboxStore, type PostgresInboxStoreOptions } from './inbox-store.ts';
export { readInstallId, selectInstallIdStatement } from './install-id.ts';
export * from './lease.ts';
export { MIGRATIONS } from './migrations.generated.ts';
export {
  MIGRATION_LOCK_TIMEOUT_MAX_MS,
  type MigrateOptions,
  type Migration,
  runMigrations,
} from './migrator.ts';
export * from './outbox-claim.ts';
export { outboxKeyLockName } from './outbox-key-lock.ts';
export * from './outbox-sql.ts';
export { createPostgresOutboxStore, type PostgresOutboxStoreOptions } from './outbox-store.ts';
export { type DataDirLock, lockDataDir } from './pglite-lock.ts';
export { DEFAULT_SCHEMA, quoteSchema } from './schema-name.ts';
export {
  createPostgresStore,
  DEFAULT_APPLICATION_NAME,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_POOL_SIZE,
  type InboxQueueOptions,
  type OpenDataApiStoreOptions,
  type OpenPgliteStoreOptions,
  type OpenPostgresStoreOptions,
  openDataApiStore,
  openPgliteStore,
  openPostgresStore,
  PGLITE_PARSERS,
  type PostgresStoreOptions,
  storeTypeParser,
} from './store.ts';
