import { installIdOf, missingInstallIdError } from '@queuebox/core';
import { driverErrorNumber } from './errors.ts';
import type { SqlExecutor, Statement } from './executor.ts';
import { quoteSchema } from './schema-name.ts';

/** Reads the install id of `schema` (the one row of `install`, migration 0005). Mirrors store-postgres. */
export function selectInstallIdStatement(schema: string): Statement {
  return { text: `SELECT id FROM ${quoteSchema(schema)}.[install];`, values: {} };
}

/** "Invalid object name": the schema, or its install table, does not exist (not migrated). */
const INVALID_OBJECT_NAME = 208;

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
    throw error;
  }
  return installIdOf(rows, schema);
}
