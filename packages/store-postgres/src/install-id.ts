import {
  installIdOf,
  missingInstallIdError,
  missingMessageUidError,
  QueueBoxError,
  StoreError,
} from '@queuebox/core';
import { sqlStateOf } from './errors.ts';
import type { SqlExecutor } from './executor.ts';
import { quoteSchema } from './schema-name.ts';

/**
 * Reads the install id of `schema` (the one row of `install`, migration 0005). It names the outbox's `message_uid`
 * (0009), so that it fails while the schema lacks it: every statement that reads outbox rows selects the column.
 */
export function selectInstallIdStatement(schema: string): { text: string; values: unknown[] } {
  const s = quoteSchema(schema);
  return {
    text: `SELECT id FROM ${s}.install WHERE NOT EXISTS (SELECT o.message_uid FROM ${s}.outbox o WHERE false)`,
    values: [],
  };
}

/** undefined_table, invalid_schema_name: the schema, or its install table, does not exist (not migrated). */
const MISSING = new Set(['42P01', '3F000']);

/** undefined_column: the outbox has no message_uid (migration 0009 has not run). */
const UNDEFINED_COLUMN = '42703';

/** insufficient_privilege: the role was not granted SELECT on `install`. */
const INSUFFICIENT_PRIVILEGE = '42501';

function missingTable(error: unknown): boolean {
  const state = error instanceof QueueBoxError ? error.context.sqlState : sqlStateOf(error);
  return typeof state === 'string' && MISSING.has(state);
}

/**
 * The install id of `schema`. A schema that migration 0005 has not reached fails with `missingInstallIdError`, one
 * that 0009 has not reached with `missingMessageUidError` (`StoreError`s that say to migrate); an outage stays
 * `StoreUnavailableError`.
 */
export async function readInstallId(executor: Pick<SqlExecutor, 'query'>, schema: string): Promise<string> {
  const { text, values } = selectInstallIdStatement(schema);
  let rows: readonly { id?: unknown }[];
  try {
    ({ rows } = await executor.query<{ id?: unknown }>(text, values));
  } catch (error) {
    if (missingTable(error)) throw missingInstallIdError(schema, 'no install table', error);
    const state = error instanceof QueueBoxError ? error.context.sqlState : sqlStateOf(error);
    if (state === UNDEFINED_COLUMN) throw missingMessageUidError(schema, error);
    if (state === INSUFFICIENT_PRIVILEGE) {
      // Read lazily by the outbox's first claim: without this a start went on, /health answered ok, and every
      // delivery failed (an outside audit granted a role the two tables only).
      throw new StoreError(
        `QueueBox's database role may not read "${schema}".install: grant it SELECT there (it needs USAGE on the schema, SELECT, INSERT, UPDATE and DELETE on outbox and inbox, and SELECT on install and schema_migrations)`,
        { cause: error, context: { sqlState: state } },
      );
    }
    throw error;
  }
  return installIdOf(rows, schema);
}
