export {
  type AdminFilter,
  type AdminStatements,
  createSqlAdminStore,
  DEFAULT_REQUEUE_BATCH_SIZE,
  KEYS_IN_FLIGHT_REPORTED,
  type SqlAdminStoreOptions,
  type SqlRequeueResult,
} from './admin-store.ts';
export type { ColumnReaders, QueryResult, SqlExecutor, Statement } from './dialect.ts';
export {
  type ApplyMigrationsOptions,
  applyMigrations,
  deadlockRetryDelayMs,
  lockWaitRetryDelayMs,
  MIGRATION_DEADLOCK_ATTEMPTS,
  MIGRATION_LOCK_WAIT_BUDGET_MS,
  type MigrationRef,
  sortMigrations,
} from './migrations.ts';
export {
  type ClaimedRows,
  compareIds,
  createRowMappers,
  inboxState,
  outboxState,
  qualified,
  type RawRow,
  type RowMappers,
  readClaimedRows,
  SessionValueError,
  type UnreadableClaim,
} from './rows.ts';
export {
  DEFAULT_RECLAIM_LIMIT,
  hasRowId,
  type IsSettleable,
  isRowId,
  type SettleDialect,
  settle,
  settleable,
  settleReport,
  uniqueClaims,
} from './settle.ts';
