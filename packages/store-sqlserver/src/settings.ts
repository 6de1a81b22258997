/**
 * The database settings the SQL Server store depends on, read and checked once before its first statement and at
 * `migrate()` (not mirrored by store-postgres: PostgreSQL has no such settings to check).
 */
import { StoreError } from '@queuebox/core';
import mssql from 'mssql';
import type { SqlExecutor, Statement } from './executor.ts';
import { TAKE_LOCK_TIMEOUT_MS } from './outbox-sql.ts';
import { tablesOf } from './schema-name.ts';

/** Lowest database compatibility level the store runs on: OPENJSON needs 130 (SQL Server 2016). */
export const MIN_COMPATIBILITY_LEVEL = 130;

/** What {@link readServerSettingsStatement} reads. */
export interface ServerSettings {
  /** `sys.databases.compatibility_level` of the current database. */
  readonly compatibilityLevel: number;
  /** `sys.databases.is_read_committed_snapshot_on`: READ COMMITTED reads row versions instead of waiting. */
  readonly readCommittedSnapshot: boolean;
  /** Enabled triggers on the outbox and inbox tables (`sys.triggers`). */
  readonly triggers: number;
}

/**
 * Reads the settings of the current database (`sys.databases`, whose row of the current database every login may
 * read) and counts the enabled triggers of the two tables (`sys.triggers`; 0 while the tables do not exist).
 */
export function readServerSettingsStatement(schema: string): Statement {
  const tables = tablesOf(schema);
  return {
    text: `SELECT d.compatibility_level, d.is_read_committed_snapshot_on AS read_committed_snapshot,
  (SELECT COUNT(*) FROM sys.triggers AS t WHERE t.parent_id IN (OBJECT_ID(@outbox), OBJECT_ID(@inbox)) AND t.is_disabled = 0) AS triggers
FROM sys.databases AS d
WHERE d.database_id = DB_ID();`,
    values: {
      outbox: { type: mssql.NVarChar(300), value: tables.outbox },
      inbox: { type: mssql.NVarChar(300), value: tables.inbox },
    },
  };
}

/**
 * Reads the settings and refuses those the store cannot work under, with a `StoreError` that says what to change
 * (`context.setting` names it):
 *
 * - compatibility level below {@link MIN_COMPATIBILITY_LEVEL}: OPENJSON, which every bulk statement reads its
 *   JSON parameter with, does not exist there.
 * - an enabled trigger on outbox or inbox: the statements answer through `OUTPUT` without `INTO`, which SQL Server
 *   refuses on a table with an enabled trigger (error 334).
 *
 * READ_COMMITTED_SNAPSHOT is reported, not required: {@link settingsWarnings} says what running without it costs.
 */
export async function checkServerSettings(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
): Promise<ServerSettings> {
  const { text, values } = readServerSettingsStatement(schema);
  const row = (
    await executor.query<{
      compatibility_level: unknown;
      read_committed_snapshot: unknown;
      triggers: unknown;
    }>(text, values)
  ).rows[0];
  if (!row) throw new StoreError('SQL Server did not answer the settings of the current database');
  const settings: ServerSettings = {
    compatibilityLevel: Number(row.compatibility_level),
    readCommittedSnapshot: row.read_committed_snapshot === true || Number(row.read_committed_snapshot) === 1,
    triggers: Number(row.triggers),
  };
  if (!(settings.compatibilityLevel >= MIN_COMPATIBILITY_LEVEL)) {
    throw new StoreError(
      `The database's compatibility level is ${settings.compatibilityLevel}; QueueBox needs ${MIN_COMPATIBILITY_LEVEL} or more (OPENJSON): ALTER DATABASE CURRENT SET COMPATIBILITY_LEVEL = ${MIN_COMPATIBILITY_LEVEL}`,
      { context: { setting: 'compatibility_level', value: settings.compatibilityLevel } },
    );
  }
  if (settings.triggers > 0) {
    throw new StoreError(
      `${settings.triggers} enabled trigger(s) on ${tablesOf(schema).outbox} or ${tablesOf(schema).inbox}: QueueBox's statements use OUTPUT without INTO, which SQL Server refuses on a table with an enabled trigger (error 334); drop or disable the trigger`,
      { context: { setting: 'triggers', value: settings.triggers } },
    );
  }
  return settings;
}

/** A setting the store runs under, but at a cost; the store tells it once (see `createSqlServerStore`). */
export interface SettingsWarning {
  /** The `process.emitWarning` code, e.g. `QUEUEBOX_SQLSERVER_RCSI_OFF`. */
  readonly code: string;
  /** The `sys.databases` column it is about. */
  readonly setting: string;
  /** What it costs and what to run instead. */
  readonly message: string;
}

/** Code of the warning that READ_COMMITTED_SNAPSHOT is off. */
export const RCSI_OFF_WARNING_CODE = 'QUEUEBOX_SQLSERVER_RCSI_OFF';

/**
 * What the store should warn about under `settings`: READ_COMMITTED_SNAPSHOT off. The outbox claim reads the heads
 * of the keys without READPAST (skipping a locked head would break per-key order), so under locking READ
 * COMMITTED it waits behind an application transaction that inserted a keyed row and is still open; after
 * TAKE_LOCK_TIMEOUT_MS the claim answers nothing (error 1222), and every claim does so until that transaction
 * ends: outbox delivery, keyed and unkeyed, stalls for as long as such a transaction stays open. With RCSI the head
 * read uses row versions and never waits. Answers no warning when RCSI is on.
 */
export function settingsWarnings(settings: ServerSettings): SettingsWarning[] {
  if (settings.readCommittedSnapshot) return [];
  return [
    {
      code: RCSI_OFF_WARNING_CODE,
      setting: 'is_read_committed_snapshot_on',
      message: `READ_COMMITTED_SNAPSHOT is off in this database: while an application transaction that enqueued a keyed outbox row stays open, every outbox claim waits ${TAKE_LOCK_TIMEOUT_MS} ms for that uncommitted row (the claim reads the heads of the keys without READPAST, which would break per-key order) and then claims nothing, keyed or unkeyed, so outbox delivery stalls until that transaction ends. Turn it on: ALTER DATABASE CURRENT SET READ_COMMITTED_SNAPSHOT ON (it needs the database to itself: run it when nothing else is connected, or add WITH ROLLBACK IMMEDIATE; READ COMMITTED then reads row versions for every application of the database)`,
    },
  ];
}
