export * from './admin-sql.ts';
export {
  createSqlServerAdminStore,
  DEFAULT_REQUEUE_BATCH_SIZE,
  type SqlServerAdminStoreOptions,
} from './admin-store.ts';
export { parseConnectionString, parseSqlServerUrl } from './connection-string.ts';
export { isDeadlock, isLockTimeout, isUnavailable, translateError } from './errors.ts';
export {
  createSqlServerExecutor,
  type QueryOptions,
  type QueryResult,
  type SqlExecutor,
  type SqlParam,
  type SqlParams,
  type SqlServerExecutorOptions,
  type Statement,
} from './executor.ts';
export { createSqlServerInboxStore, type SqlServerInboxStoreOptions } from './inbox-store.ts';
export { readInstallId, selectInstallIdStatement } from './install-id.ts';
export { MIGRATIONS } from './migrations.generated.ts';
export { type MigrateOptions, type Migration, renderMigration, runMigrations } from './migrator.ts';
export { outboxKeyLockResource } from './outbox-key-lock.ts';
export {
  KEY_LOCK_TIMEOUT_MS,
  LOCKS_PER_BATCH,
  lockOutboxKeysStatement,
  MAX_ROWS_PER_STATEMENT,
  TAKE_LOCK_TIMEOUT_MS,
} from './outbox-sql.ts';
export { createSqlServerOutboxStore, type SqlServerOutboxStoreOptions } from './outbox-store.ts';
export { DEFAULT_SCHEMA, quoteSchema } from './schema-name.ts';
export {
  checkServerSettings,
  MIN_COMPATIBILITY_LEVEL,
  RCSI_OFF_WARNING_CODE,
  readServerSettingsStatement,
  type ServerSettings,
  type SettingsWarning,
  settingsWarnings,
} from './settings.ts';
export {
  createSqlServerStore,
  DEFAULT_POOL_SIZE,
  type OpenSqlServerStoreOptions,
  openSqlServerStore,
  processWarnings,
  type SqlServerStoreOptions,
} from './store.ts';
