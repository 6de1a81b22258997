import { installIdOf, missingInstallIdError, missingMessageUidError } from '@queuebox/core';
import { driverErrorNumber } from './errors.ts';
import type { SqlExecutor, Statement } from './executor.ts';
import { quoteSchema } from './schema-name.ts';

/**
 * Reads the install id of `schema` (the one row of `install`, migration 0005). It names the outbox's `message_uid`
 * (0009), so that it fails while the schema lacks it. Mirrors store-postgres.
 */
export function selectInstallIdStatement(schema: string): Statement {
  const s = quoteSchema(schema);
  return {
    text: `SELECT id FROM ${s}.[install] WHERE NOT EXISTS (SELECT o.message_uid FROM ${s}.[outbox] o WHERE 1 = 0);`,
    values: {},
  };
}

/** "Invalid object name": the schema, or its install table, does not exist (not migrated). */
const INVALID_OBJECT_NAME = 208;

/** "Invalid column name": the outbox has no message_uid (migration 0009 has not run). */
const INVALID_COLUMN_NAME = 207;

/**
 * The install id of `schema`. A schema that migration 0005 has not reached fails with `missingInstallIdError`
 * (a `StoreError` that says to migrate); an outage stays `StoreUnavailableError`.
 */
export async function readInstallId(executor: Pick<SqlExecutor, 'query'>, schema: string): Promise<string> {
  const { text, values } = selectInstallIdStatement(schema);
  let rows: readonly { id?: unknown }[];
  try {
    ({ rows } = await executor.query<{ id?: unknown }>(text, values));
  } catch (error) {
    if (driverErrorNumber(error) === INVALID_OBJECT_NAME) {
      throw missingInstallIdError(schema, 'no install table', error);
    }
    if (driverErrorNumber(error) === INVALID_COLUMN_NAME) throw missingMessageUidError(schema, error);
    throw error;
  }
  return installIdOf(rows, schema);
}
