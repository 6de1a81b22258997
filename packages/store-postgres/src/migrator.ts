import {
  MigrationError,
  type MigrationProgress,
  type MigrationReport,
  type NewerSchema,
  QueueBoxError,
  StoreUnavailableError,
} from '@queuebox/core';
import { applyMigrations, MIGRATION_LOCK_WAIT_BUDGET_MS, sortMigrations } from '@queuebox/sql-store-common';
import type { SqlExecutor } from './executor.ts';
import { type EmbeddedMigration, MIGRATIONS } from './migrations.generated.ts';
import { DEFAULT_SCHEMA, quoteSchema } from './schema-name.ts';

/** One migration: the number of its file, its name, and plain SQL with unqualified names. */
export type Migration = EmbeddedMigration;

/** Options of `runMigrations`. */
export interface MigrateOptions {
  /** Schema to migrate (created when missing). Default `queuebox`. */
  readonly schema?: string;
  /** Told before a pending migration runs and after it committed. Default: nothing. */
  readonly onMigration?: (progress: MigrationProgress) => void;
  /** The migrations to apply, in any order. Default: the embedded files of migrations/postgres. */
  readonly migrations?: readonly Migration[];
}

/** Key of the advisory lock that serialises migrators of one schema (a 64-bit hash of its name). */
function lockStatement(schema: string) {
  return {
    text: 'SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0::bigint))',
    values: [`queuebox.migrate:${schema}`],
  };
}

/*
 * Migrations and the writers. The relay's forward writes inbox, then outbox, in one transaction (with an advisory
 * key lock first); 0002, 0004, 0007 and 0008 lock outbox, then inbox. With an application's transaction holding
 * the outbox, a forward queued behind such a migration can deadlock with it once the migration holds the outbox
 * and asks for the inbox; PostgreSQL then aborts the migration or the forward, never the application (the
 * application waits on nothing the others hold). A migration so aborted rolls back whole and runs again
 * (`isDeadlock`), and the relay tries a failed forward again. Both ways of locking first were tried and
 * reverted (session 17): one weak lock taken before every migration deadlocked with a claim holding its read lock
 * when the migration later asked for a stronger one (0004's DROP INDEX); each migration locking inbox, then
 * outbox, in its strongest mode held the inbox while it waited for the application's outbox, which stalled every
 * webhook for as long, and closed a cycle through a forward's advisory key lock that aborted the application's
 * own transaction.
 */

/**
 * The longest a migration's statements wait for a table's lock in one try: 5 s. The first try waits the server's
 * `deadlock_timeout` (1 s by default) and 200 ms more, and each try after it half as long again, up to this; between
 * tries the migration rolls back and steps aside 1 to 3 s (`lockWaitRetryDelayMs`), within
 * `MIGRATION_LOCK_WAIT_BUDGET_MS`. An `ALTER TABLE` waiting for its ACCESS EXCLUSIVE lock behind a long transaction
 * (an application's, a `pg_dump`'s) holds up every later lock request on the table, the application's inserts
 * included, for as long as it waits (outside audits: an insert waited 4 s behind 0009's `ADD COLUMN` with no bound).
 * Past `deadlock_timeout` the server also cancels an autovacuum in the way, which it does only from that check; and
 * a table that the application keeps busy with transactions of a second or so is taken within the first tries
 * (review: with a 200 ms bound, a stream of 1-second transactions failed 0009 after 2 minutes of tries).
 */
export const MIGRATION_LOCK_TIMEOUT_MAX_MS = 5_000;

/**
 * The statement setting a try's lock timeout (local to the migration's transaction): `deadlock_timeout` + 200 ms,
 * times 1.5 for each try before it, at most {@link MIGRATION_LOCK_TIMEOUT_MAX_MS}.
 */
function lockTimeoutStatement(tryNumber: number): string {
  const factor = 1.5 ** Math.max(0, tryNumber - 1);
  return `SELECT pg_catalog.set_config('lock_timeout', least(${MIGRATION_LOCK_TIMEOUT_MAX_MS}, pg_catalog.round((extract(epoch FROM pg_catalog.current_setting('deadlock_timeout')::interval) * 1000 + 200) * ${factor}))::int::text || 'ms', true)`;
}

/** Whether a migration's transaction was a deadlock's victim (SQLSTATE 40P01), raw or translated. */
function isDeadlock(error: unknown): boolean {
  return hasSqlState(error, '40P01');
}

/** Whether a migration's statement gave up waiting for a lock (55P03, see `MIGRATION_LOCK_TIMEOUT_MAX_MS`). */
function isLockTimeout(error: unknown): boolean {
  return hasSqlState(error, '55P03');
}

function hasSqlState(error: unknown, sqlState: string): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const state = e instanceof QueueBoxError ? e.context.sqlState : (e as { code?: unknown }).code;
    if (state === sqlState) return true;
  }
  return false;
}

function bootstrapStatements(quoted: string): string[] {
  return [
    `CREATE SCHEMA IF NOT EXISTS ${quoted}`,
    `CREATE TABLE IF NOT EXISTS ${quoted}.schema_migrations (
      version    INTEGER PRIMARY KEY,
      name       VARCHAR(200) NOT NULL,
      applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`,
  ];
}

function appliedVersionsStatement(quoted: string) {
  return { text: `SELECT version FROM ${quoted}.schema_migrations ORDER BY version`, values: [] };
}

function recordVersionStatement(quoted: string, migration: Migration) {
  return {
    text: `INSERT INTO ${quoted}.schema_migrations (version, name) VALUES ($1, $2)`,
    values: [migration.version, migration.name],
  };
}

async function appliedVersions(tx: SqlExecutor, quoted: string): Promise<Set<number>> {
  const { text, values } = appliedVersionsStatement(quoted);
  const { rows } = await tx.query<{ version: number }>(text, values);
  return new Set(rows.map((r) => Number(r.version)));
}

/**
 * A migration, and the wait for another migrator's lock, may outlast any normal statement: they run without the
 * executor's query timeout.
 */
const NO_TIMEOUT = { timeoutMs: 0 } as const;

/**
 * Nor the server's: a `statement_timeout` or `lock_timeout` set for the role, the database or a parameter group
 * failed an index build on a large table (or the wait for another migrator's lock) at every try; so did a
 * `transaction_timeout` (PostgreSQL 17 and later, where the setting exists). Local to each migration's transaction.
 */
const NO_SERVER_TIMEOUTS = `SELECT pg_catalog.set_config('statement_timeout', '0', true),
  pg_catalog.set_config('lock_timeout', '0', true),
  pg_catalog.set_config('idle_in_transaction_session_timeout', '0', true),
  CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 170000
    THEN pg_catalog.set_config('transaction_timeout', '0', true) END`;

/**
 * The oldest PostgreSQL QueueBox runs on: the outbox claim reads `pg_column_compression` (14; on 13 every claim
 * failed while migrations, the start and /health succeeded), and the migrations use `gen_random_uuid()` (13) and
 * the servers' `idle_session_timeout` (14).
 */
export const MIN_SERVER_VERSION_NUM = 140_000;

/** Refuses a server older than {@link MIN_SERVER_VERSION_NUM} with a `MigrationError` naming its version. */
async function checkServerVersion(executor: SqlExecutor): Promise<void> {
  const { rows } = await executor.query<{ num: string; version: string }>(
    "SELECT pg_catalog.current_setting('server_version_num') AS num, pg_catalog.current_setting('server_version') AS version",
  );
  const num = Number(rows[0]?.num);
  if (Number.isFinite(num) && num < MIN_SERVER_VERSION_NUM) {
    throw new MigrationError(
      `QueueBox needs PostgreSQL 14 or later; this server is PostgreSQL ${rows[0]?.version ?? num}. Nothing was migrated.`,
      { context: { serverVersionNum: num } },
    );
  }
}

/**
 * Refuses a `schema_migrations` in the schema that is not QueueBox's: Rails, dbmate, golang-migrate and others name
 * their version tables so, and with QueueBox in the application's own schema (`public`, say) the migrator took that
 * table for its own: it failed with a column error, or read another tool's versions 1 to 12 as its own, applied
 * nothing, created no table, and reported the schema newer than itself (an outside audit). QueueBox's has the
 * columns version (integer), name and applied_at, in that order.
 */
async function checkVersionTable(executor: SqlExecutor, schema: string): Promise<void> {
  const { rows } = await executor.query<{ name: string; type: string }>(
    `SELECT a.attname AS name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = pg_catalog.to_regclass(pg_catalog.format('%I.schema_migrations', $1::text))
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`,
    [schema],
  );
  if (rows.length === 0) return;
  const names = rows.map((r) => r.name);
  if (names.join(',') === 'version,name,applied_at' && rows[0]?.type === 'integer') return;
  throw new MigrationError(
    `Schema ${schema} has a table schema_migrations that is not QueueBox's (its columns: ${rows.map((r) => `${r.name} ${r.type}`).join(', ')}): another migration tool keeps its versions there (Rails, dbmate and golang-migrate use that name). Give QueueBox a schema of its own (database.schema)`,
    { context: { schema, columns: names } },
  );
}

/** insufficient_privilege: "permission denied for database", "must be owner of function …". */
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * What a migration that the role may not apply says to do. A migration changes tables, indexes and the trigger
 * function that the role which migrated first owns: CREATE on the database is not enough (an outside audit granted
 * it, then CREATE on the schema, and met "must be owner of function queuebox_notify_insert").
 */
const NOT_OWNER_ADVICE =
  'this role may not create or change the schema: apply the migrations as a role that may, the owner of the schema and its tables once it exists (the role that migrated it first), with `npx queuebox migrate` or a start of QueueBox under that role; a role with only the rights to read and write the tables starts on a schema that has every migration';

/**
 * Whether the schema and its version table exist and every migration is applied: then nothing needs the CREATE
 * privilege on the database (`CREATE SCHEMA IF NOT EXISTS` checks it before it checks the schema), so a role with
 * only the rights to read and write the tables can start QueueBox on a schema another role migrated.
 */
async function upToDate(
  executor: SqlExecutor,
  schema: string,
  versions: readonly number[],
): Promise<boolean> {
  const { rows } = await executor.query<{ present: boolean }>(
    `SELECT pg_catalog.to_regclass(pg_catalog.format('%I.schema_migrations', $1::text)) IS NOT NULL AS present`,
    [schema],
  );
  if (rows[0]?.present !== true) return false;
  const applied = await appliedVersions(executor, quoteSchema(schema));
  return versions.every((version) => applied.has(version));
}

/**
 * Applies the migrations that `schema_migrations` of `schema` does not list, in version order, and reports what
 * it applied and the current version.
 *
 * Each migration runs in its own transaction together with its version row, under a transaction-scoped advisory
 * lock keyed by the schema name; the applied versions are read again under the lock. Two processes migrating at
 * once therefore apply each migration once, and the lock is released by COMMIT/ROLLBACK, so this works behind a
 * transaction-mode pooler. The migration's SQL runs with `SET LOCAL search_path` to the schema. A failing
 * migration rolls back with its version row and raises `MigrationError` naming the version and the SQL error;
 * the migrations before it stay applied. A schema a newer QueueBox migrated (a version above every known one) is
 * used as it is, and the report says so (`newer`).
 */
export async function runMigrations(
  executor: SqlExecutor,
  options: MigrateOptions = {},
): Promise<MigrationReport> {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  const quoted = quoteSchema(schema);
  const migrations = sortMigrations(options.migrations ?? MIGRATIONS);
  const lock = lockStatement(schema);
  await checkServerVersion(executor);
  await checkVersionTable(executor, schema);

  if (
    await upToDate(
      executor,
      schema,
      migrations.map((m) => m.version),
    )
  ) {
    const report = await applyMigrations({
      migrations,
      ...(options.onMigration ? { onMigration: options.onMigration } : {}),
      isDeadlock,
      applyOne: async () => false,
      appliedVersions: async () => [...(await appliedVersions(executor, quoted))],
    });
    return withNewer(report, migrations);
  }

  // Concurrent CREATE SCHEMA / CREATE TABLE IF NOT EXISTS can still collide in the catalogs; the lock orders them.
  await wrapBootstrap(() =>
    executor.transaction(async (tx) => {
      await tx.query(NO_SERVER_TIMEOUTS, undefined, NO_TIMEOUT);
      await tx.query(lock.text, lock.values, NO_TIMEOUT);
      for (const statement of bootstrapStatements(quoted)) await tx.query(statement, undefined, NO_TIMEOUT);
    }),
  );

  // Tries of each migration so far, for its lock timeout.
  const triesOf = new Map<number, number>();
  const report = await applyMigrations({
    migrations,
    ...(options.onMigration ? { onMigration: options.onMigration } : {}),
    isDeadlock,
    isLockTimeout,
    applyOne: (migration, applying) =>
      executor.transaction(async (tx) => {
        await tx.query(NO_SERVER_TIMEOUTS, undefined, NO_TIMEOUT);
        await tx.query(lock.text, lock.values, NO_TIMEOUT);
        if ((await appliedVersions(tx, quoted)).has(migration.version)) return false;
        applying();
        await tx.query(`SET LOCAL search_path TO ${quoted}`);
        // After the migrators' own lock (waited for without a bound): only the tables' locks are bounded, longer at
        // each try of this migration.
        const tries = (triesOf.get(migration.version) ?? 0) + 1;
        triesOf.set(migration.version, tries);
        await tx.query(lockTimeoutStatement(tries));
        try {
          await tx.query(migration.sql, undefined, NO_TIMEOUT);
        } catch (error) {
          // An outage is not the migration's fault: the caller may retry it as it is.
          throw error instanceof StoreUnavailableError ? error : migrationFailed(migration, error);
        }
        const record = recordVersionStatement(quoted, migration);
        await tx.query(record.text, record.values);
        return true;
      }),
    appliedVersions: async () => [...(await appliedVersions(executor, quoted))],
  });
  return withNewer(report, migrations);
}

function migrationFailed(migration: Migration, error: unknown): MigrationError {
  const cause = error instanceof QueueBoxError && error.cause !== undefined ? error.cause : error;
  const detail = cause instanceof Error ? cause.message : String(cause);
  const sqlState = error instanceof QueueBoxError ? error.context.sqlState : undefined;
  const label = `${String(migration.version).padStart(4, '0')}_${migration.name}`;
  // 55P03: its wait for a table's lock gave up (see MIGRATION_LOCK_TIMEOUT_MAX_MS); the last of its tries says what to do.
  const advice =
    sqlState === '55P03'
      ? ` (it could not get the lock of a table it changes, the outbox or the inbox, in any of its tries over ${MIGRATION_LOCK_WAIT_BUDGET_MS / 1000} s, each waiting up to ${MIGRATION_LOCK_TIMEOUT_MAX_MS / 1000} s: a transaction kept it, or transactions kept it busy; see pg_stat_activity for an open transaction or a long query on them, and run the migration again when they are over)`
      : sqlState === INSUFFICIENT_PRIVILEGE
        ? ` (${NOT_OWNER_ADVICE})`
        : '';
  return new MigrationError(`Migration ${label} failed: ${detail}${advice}`, {
    cause: error,
    context: { version: migration.version, name: migration.name, ...(sqlState ? { sqlState } : {}) },
  });
}

/**
 * What a bootstrap that lost a race to another migrator fails with: a unique violation in the catalogs
 * (`pg_namespace_nspname_index`), a duplicate schema or table. Under the lock the loser should see the winner's
 * schema, but its IF NOT EXISTS checked a catalog snapshot taken before the winner committed (seen through PgBouncer
 * in transaction mode: 3 of 8 and 6 of 14 runs of 6 migrators on a fresh schema). A second try sees it.
 */
const LOST_CREATE_RACE = new Set(['23505', '42P06', '42P07']);

/** Tries of the bootstrap (see `LOST_CREATE_RACE`). */
const BOOTSTRAP_TRIES = 3;

async function wrapBootstrap(run: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await run();
      return;
    } catch (error) {
      if (error instanceof StoreUnavailableError) throw error;
      const sqlState = error instanceof QueueBoxError ? error.context.sqlState : undefined;
      if (attempt < BOOTSTRAP_TRIES && typeof sqlState === 'string' && LOST_CREATE_RACE.has(sqlState))
        continue;
      const detail = error instanceof Error ? error.message : String(error);
      const advice = sqlState === INSUFFICIENT_PRIVILEGE ? ` (${NOT_OWNER_ADVICE})` : '';
      throw new MigrationError(`Creating the schema and its version table failed: ${detail}${advice}`, {
        cause: error,
        ...(typeof sqlState === 'string' ? { context: { sqlState } } : {}),
      });
    }
  }
}

/**
 * `report` with `newer` set when the schema's latest applied migration is above every migration of `migrations`: a
 * newer QueueBox migrated it. Not refused (an older process keeps running on a newer schema during a rolling
 * upgrade, which migrations are written to allow); the caller warns.
 */
function withNewer(
  report: MigrationReport,
  migrations: readonly { readonly version: number }[],
): MigrationReport {
  const known = migrations.reduce((max, migration) => Math.max(max, migration.version), 0);
  if (report.current <= known) return report;
  const newer: NewerSchema = { applied: report.current, known };
  return { ...report, newer };
}
