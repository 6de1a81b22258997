import {
  MigrationError,
  type MigrationProgress,
  type MigrationReport,
  type NewerSchema,
  QueueBoxError,
  StoreUnavailableError,
} from '@queuebox/core';
import { applyMigrations, MIGRATION_LOCK_WAIT_BUDGET_MS, sortMigrations } from '@queuebox/sql-store-common';
import mssql from 'mssql';
import { driverErrorNumber, isDeadlock, isLockTimeout } from './errors.ts';
import type { SqlExecutor, Statement } from './executor.ts';
import { type EmbeddedMigration, MIGRATIONS } from './migrations.generated.ts';
import { DEFAULT_SCHEMA, quoteSchema, type Tables, tablesOf } from './schema-name.ts';

/** One migration: the number of its file, its name, and T-SQL that names the schema as `$(schema)`. */
export type Migration = EmbeddedMigration;

/** Options of `runMigrations`. */
export interface MigrateOptions {
  /** Schema to migrate (created when missing). Default `queuebox`. */
  readonly schema?: string;
  /** Told before a pending migration runs and after it committed. Default: nothing. */
  readonly onMigration?: (progress: MigrationProgress) => void;
  /** The migrations to apply, in any order. Default: the embedded files of migrations/sqlserver. */
  readonly migrations?: readonly Migration[];
  /** How long a migrator waits for another one's lock, in milliseconds. Default 600000 (10 minutes). */
  readonly lockTimeoutMs?: number;
}

/** Default of {@link MigrateOptions.lockTimeoutMs}. */
export const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS = 600_000;

/**
 * The longest a migration's statements wait for a table's lock in one try: 5 s. The first try waits 1.2 s, each try
 * after it half as long again, up to this; between tries the migration rolls back and steps aside 1 to 3 s, within
 * `MIGRATION_LOCK_WAIT_BUDGET_MS` — as on PostgreSQL (see its migrator). A schema change (`ALTER TABLE`, `CREATE
 * INDEX`) asks for a Sch-M lock, and while it waits behind a long transaction every later request for a lock on the
 * table queues behind it, the application's inserts and the poller's claims included; before, it waited with no bound
 * (the session's LOCK_TIMEOUT, -1 by default), and so did they.
 */
export const MIGRATION_LOCK_TIMEOUT_MAX_MS = 5_000;

/** The lock timeout of a migration's `tryNumber`th try (1-based): 1.2 s × 1.5^(try − 1), at most 5 s. */
export function migrationLockTimeoutMs(tryNumber: number): number {
  return Math.min(MIGRATION_LOCK_TIMEOUT_MAX_MS, Math.round(1_200 * 1.5 ** Math.max(0, tryNumber - 1)));
}

/** A batch that must be the first statement of its batch (CREATE VIEW, PROCEDURE, TRIGGER, FUNCTION…). */
const FIRST_IN_BATCH =
  /^\s*(?:CREATE|ALTER|CREATE\s+OR\s+ALTER)\s+(?:VIEW|PROC|PROCEDURE|TRIGGER|FUNCTION|SCHEMA|DEFAULT|RULE)\b/i;

/**
 * `batch` with its lock waits bounded by `lockTimeoutMs`: `SET LOCK_TIMEOUT` first in the same batch. The executor
 * sends every batch through `sp_executesql`, and SQL Server restores a SET option set there when the batch returns,
 * so the bound neither outlives the batch nor reaches the next user of the pooled connection. A batch that must
 * begin with its CREATE (a view, a procedure, a trigger…) is left as it is: nothing bounds its waits.
 */
export function boundedBatch(batch: string, lockTimeoutMs: number): string {
  if (FIRST_IN_BATCH.test(batch.replace(/^(?:\s*--[^\n]*\n)+/, ''))) return batch;
  return `SET LOCK_TIMEOUT ${Math.max(0, Math.floor(lockTimeoutMs))};\n${batch}`;
}

/** The placeholder migrations write for the schema, as sqlcmd writes a variable. */
export const SCHEMA_PLACEHOLDER = '$(schema)';

/**
 * A migration's text for `schema`: every `$(schema)` replaced by the schema name, after checking the name (a
 * `ConfigError` for anything but `^[A-Za-z_][A-Za-z0-9_]{0,62}$`, so it cannot close the `[…]` or `N'…'` it is
 * written in). Any other `$(name)` is refused: it would be a sqlcmd variable that nothing fills.
 */
export function renderMigration(sql: string, schema: string): string {
  quoteSchema(schema);
  const rendered = sql.replaceAll(SCHEMA_PLACEHOLDER, schema);
  const unknown = /\$\([A-Za-z_][A-Za-z0-9_]*\)/.exec(rendered);
  if (unknown) {
    throw new MigrationError(
      `The migration uses ${unknown[0]}, but only ${SCHEMA_PLACEHOLDER} is filled in`,
      {
        context: { placeholder: unknown[0] },
      },
    );
  }
  return rendered;
}

/**
 * The batches of a script: the text between lines that hold only `GO` (sqlcmd's batch separator, which the
 * server itself does not understand). Empty batches are dropped.
 */
export function splitBatches(sql: string): string[] {
  return sql
    .split(/^[ \t]*GO[ \t]*(?:--[^\n]*)?$/gim)
    .map((batch) => batch.trim())
    .filter((batch) => batch.replace(/--[^\n]*/g, '').trim().length > 0);
}

/**
 * The `sp_getapplock` resource of the migration lock of `schema`: `queuebox.migrate:<schema in lower case>`.
 * Resource names compare binary but schema names resolve through the database's collation (usually
 * case-insensitive), so `QueueBox` and `queuebox` — the same schema there — must take the same lock.
 */
export function migrationLockResource(schema: string): string {
  return `queuebox.migrate:${schema.toLowerCase()}`;
}

/**
 * Takes the migration lock of the schema ({@link migrationLockResource}): `sp_getapplock` owned by the
 * transaction, so COMMIT or ROLLBACK releases it and nothing outlives the transaction. Answers sp_getapplock's
 * status: 0 or 1 granted, below 0 not.
 */
export function acquireMigrationLock(schema: string, lockTimeoutMs: number): Statement {
  const tables = tablesOf(schema);
  return {
    text: `DECLARE @status INT;
EXEC @status = sys.sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Transaction', @LockTimeout = @lockTimeoutMs;
SELECT @status AS status;`,
    values: {
      resource: { type: mssql.NVarChar(255), value: migrationLockResource(tables.schema) },
      lockTimeoutMs: {
        type: mssql.Int,
        value: Math.max(0, Math.min(Math.floor(lockTimeoutMs), 2_147_483_647)),
      },
    },
  };
}

/** Creates the schema when it is missing. CREATE SCHEMA must be alone in a batch, hence the dynamic SQL. */
export function createSchemaIfMissing(schema: string): Statement {
  const tables = tablesOf(schema);
  return {
    text: `IF SCHEMA_ID(@schema) IS NULL EXEC(N'CREATE SCHEMA ${quoteSchema(tables.schema)}');`,
    values: { schema: { type: mssql.NVarChar(128), value: tables.schema } },
  };
}

/** Creates the schema-version table when it is missing. */
export function createSchemaMigrationsIfMissing(schema: string): Statement {
  const tables = tablesOf(schema);
  return {
    text: `IF OBJECT_ID(@table, N'U') IS NULL
CREATE TABLE ${tables.schemaMigrations} (
  version    INT NOT NULL,
  name       NVARCHAR(200) NOT NULL,
  applied_at DATETIME2(3) NOT NULL CONSTRAINT schema_migrations_applied_at_df DEFAULT SYSUTCDATETIME(),
  CONSTRAINT schema_migrations_pkey PRIMARY KEY CLUSTERED (version)
);`,
    values: { table: { type: mssql.NVarChar(300), value: tables.schemaMigrations } },
  };
}

/**
 * The columns of the schema's `schema_migrations`, in table order, with their type names (`TYPE_NAME`: `int`,
 * `nvarchar`, `bigint`, `bit`…); no rows when there is no such table.
 */
export function selectVersionTableColumns(schema: string): Statement {
  const tables = tablesOf(schema);
  return {
    text: `SELECT c.name AS name, TYPE_NAME(c.user_type_id) AS type
FROM sys.columns AS c
WHERE c.object_id = OBJECT_ID(@table, N'U')
ORDER BY c.column_id;`,
    values: { table: { type: mssql.NVarChar(300), value: tables.schemaMigrations } },
  };
}

/** QueueBox's `schema_migrations` (see `createSchemaMigrationsIfMissing`): its columns and their types, in order. */
const VERSION_TABLE_COLUMNS = 'version int, name nvarchar, applied_at datetime2';

/**
 * Refuses a `schema_migrations` in the schema that is not QueueBox's, as store-postgres's migrator does: Rails,
 * dbmate, golang-migrate and others name their version tables so, and with QueueBox in the application's own schema
 * (`dbo`, say) the migrator took that table for its own: it read another tool's versions 1 to 12 as its own, applied
 * nothing, created no table, and reported the schema newer than itself, or failed with a column error. QueueBox's
 * has the columns version (int), name (nvarchar) and applied_at (datetime2), in that order.
 */
async function checkVersionTable(executor: SqlExecutor, tables: Tables): Promise<void> {
  const { text, values } = selectVersionTableColumns(tables.schema);
  const { rows } = await executor.query<{ name: string; type: string }>(text, values);
  if (rows.length === 0) return;
  const columns = rows.map((r) => `${r.name} ${r.type}`);
  if (columns.join(', ') === VERSION_TABLE_COLUMNS) return;
  throw new MigrationError(
    `Schema ${tables.schema} has a table schema_migrations that is not QueueBox's (its columns: ${columns.join(', ')}): another migration tool keeps its versions there (Rails, dbmate and golang-migrate use that name). Give QueueBox a schema of its own (database.schema)`,
    { context: { schema: tables.schema, columns: rows.map((r) => r.name) } },
  );
}

/** The applied versions, ascending. */
export function selectAppliedVersions(schema: string): Statement {
  const tables = tablesOf(schema);
  return {
    text: `SELECT m.version FROM ${tables.schemaMigrations} AS m ORDER BY m.version;`,
    values: {},
  };
}

/** Records `migration` as applied. */
export function insertAppliedVersion(schema: string, migration: Migration): Statement {
  const tables = tablesOf(schema);
  return {
    text: `INSERT INTO ${tables.schemaMigrations} (version, name) VALUES (@version, @name);`,
    values: {
      version: { type: mssql.Int, value: migration.version },
      name: { type: mssql.NVarChar(200), value: migration.name },
    },
  };
}

async function lock(tx: SqlExecutor, tables: Tables, lockTimeoutMs: number): Promise<void> {
  const { text, values } = acquireMigrationLock(tables.schema, lockTimeoutMs);
  // The request must outlast the lock wait, or the driver gives up before sp_getapplock answers.
  const { rows } = await tx.query<{ status: number }>(text, values, { timeoutMs: lockTimeoutMs + 30_000 });
  const status = rows[0]?.status;
  if (typeof status !== 'number' || status < 0) {
    // -1 timeout, -2 cancelled, -3 deadlock victim, -999 parameter or call error.
    throw new MigrationError(
      `Another migrator held the lock of schema ${tables.schema} (sp_getapplock ${status})`,
      {
        context: { schema: tables.schema, status },
      },
    );
  }
}

async function appliedVersions(tx: SqlExecutor, tables: Tables): Promise<Set<number>> {
  const { text, values } = selectAppliedVersions(tables.schema);
  const { rows } = await tx.query<{ version: number }>(text, values);
  return new Set(rows.map((r) => Number(r.version)));
}

/**
 * Applies the migrations that `schema_migrations` of `schema` does not list, in version order, and reports what
 * it applied and the current version.
 *
 * Each migration runs in its own transaction together with its version row, under an exclusive
 * `sp_getapplock` owned by that transaction and named after the schema; the applied versions are read again
 * under the lock. Two processes migrating at once therefore apply each migration once, and COMMIT/ROLLBACK
 * releases the lock. The migration's `$(schema)` placeholders are replaced by the schema name and its `GO`
 * batches run in order. A failing migration rolls back with its version row and raises `MigrationError` naming
 * the version and the SQL Server error; the migrations before it stay applied. An outage raises
 * `StoreUnavailableError` instead, so the caller may run the same migration again. A schema a newer QueueBox
 * migrated (a version above every known one) is used as it is, and the report says so (`newer`). A
 * `schema_migrations` of another tool in the schema is refused with a `MigrationError` before anything is created.
 */
export async function runMigrations(
  executor: SqlExecutor,
  options: MigrateOptions = {},
): Promise<MigrationReport> {
  const tables = tablesOf(options.schema ?? DEFAULT_SCHEMA);
  const migrations = sortMigrations(options.migrations ?? MIGRATIONS);
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_MIGRATION_LOCK_TIMEOUT_MS;
  // Render all first: a bad placeholder fails the run before anything is applied.
  const batches = new Map(
    migrations.map((m) => [m.version, splitBatches(renderMigration(m.sql, tables.schema))]),
  );

  await checkVersionTable(executor, tables);
  await wrapBootstrap(tables, () =>
    executor.transaction(async (tx) => {
      await lock(tx, tables, lockTimeoutMs);
      for (const statement of [
        createSchemaIfMissing(tables.schema),
        createSchemaMigrationsIfMissing(tables.schema),
      ]) {
        await tx.query(statement.text, statement.values);
      }
    }),
  );

  // Tries of each migration so far, for its lock timeout.
  const triesOf = new Map<number, number>();
  const report = await applyMigrations({
    migrations,
    ...(options.onMigration ? { onMigration: options.onMigration } : {}),
    // Error 1205: the migration's transaction was a deadlock's victim, rolled back whole; it runs again.
    isDeadlock,
    // Error 1222: a statement gave up waiting for a table's lock (MIGRATION_LOCK_TIMEOUT_MAX_MS); the transaction
    // is rolled back and the migration runs again after a pause, within the run's budget.
    isLockTimeout,
    applyOne: (migration, applying) =>
      executor.transaction(async (tx) => {
        // The migrators' own lock is waited for up to lockTimeoutMs; only the tables' locks are bounded per try.
        await lock(tx, tables, lockTimeoutMs);
        if ((await appliedVersions(tx, tables)).has(migration.version)) return false;
        applying();
        const tries = (triesOf.get(migration.version) ?? 0) + 1;
        triesOf.set(migration.version, tries);
        const tableLockTimeoutMs = migrationLockTimeoutMs(tries);
        try {
          // A migration may rebuild a large table: no request timeout.
          for (const batch of batches.get(migration.version) ?? [])
            await tx.query(boundedBatch(batch, tableLockTimeoutMs), {}, { timeoutMs: 0 });
        } catch (error) {
          if (isLockTimeout(error)) throw migrationFailed(migration, error);
          throw error instanceof StoreUnavailableError ? error : migrationFailed(migration, error);
        }
        const record = insertAppliedVersion(tables.schema, migration);
        await tx.query(record.text, record.values);
        return true;
      }),
    appliedVersions: async () => [...(await appliedVersions(executor, tables))],
  });
  return withNewerSchema(report, migrations);
}

function migrationFailed(migration: Migration, error: unknown): MigrationError {
  const cause = error instanceof QueueBoxError && error.cause !== undefined ? error.cause : error;
  const detail = cause instanceof Error ? cause.message : String(cause);
  const number =
    error instanceof QueueBoxError && error.context.number !== undefined
      ? error.context.number
      : driverErrorNumber(error);
  const label = `${String(migration.version).padStart(4, '0')}_${migration.name}`;
  // 1222: its wait for a table's lock gave up (see MIGRATION_LOCK_TIMEOUT_MAX_MS); the last of its tries says what to do.
  const advice =
    number === 1222
      ? ` (it could not get the lock of a table it changes, the outbox or the inbox, in any of its tries over ${MIGRATION_LOCK_WAIT_BUDGET_MS / 1000} s, each waiting up to ${MIGRATION_LOCK_TIMEOUT_MAX_MS / 1000} s: a transaction kept it, or transactions kept it busy; see sys.dm_tran_locks and sys.dm_exec_requests (blocking_session_id) for an open transaction on them, and run the migration again when it is over)`
      : '';
  return new MigrationError(`Migration ${label} failed: ${detail}${advice}`, {
    cause: error,
    context: {
      version: migration.version,
      name: migration.name,
      ...(number !== undefined ? { number } : {}),
    },
  });
}

async function wrapBootstrap(tables: Tables, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (error instanceof StoreUnavailableError || error instanceof MigrationError) throw error;
    const detail = error instanceof Error ? error.message : String(error);
    throw new MigrationError(`Creating schema ${tables.schema} and its version table failed: ${detail}`, {
      cause: error,
      context: { schema: tables.schema },
    });
  }
}

/**
 * `report` with `newer` set when the schema's latest applied migration is above every migration of `migrations`: a
 * newer QueueBox migrated it. Not refused (an older process keeps running on a newer schema during a rolling
 * upgrade, which migrations are written to allow); the caller warns.
 */
export function withNewerSchema(
  report: MigrationReport,
  migrations: readonly { readonly version: number }[],
): MigrationReport {
  const known = migrations.reduce((max, migration) => Math.max(max, migration.version), 0);
  if (report.current <= known) return report;
  const newer: NewerSchema = { applied: report.current, known };
  return { ...report, newer };
}
