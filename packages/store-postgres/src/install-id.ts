import { installIdOf, missingInstallIdError, QueueBoxError } from '@queuebox/core';
import { sqlStateOf } from './errors.ts';
import type { SqlExecutor } from './executor.ts';
import { quoteSchema } from './schema-name.ts';

/** Reads the install id of `schema` (the one row of `install`, migration 0005). */
export function selectInstallIdStatement(schema: string): { text: string; values: unknown[] } {
  return { text: `SELECT id FROM ${quoteSchema(schema)}.install`, values: [] };
}

/** undefined_table, invalid_schema_name: the schema, or its install table, does not exist (not migrated). */
const MISSING = new Set(['42P01', '3F000']);

function missingTable(error: unknown): boolean {
  const state = error instanceof QueueBoxError ? error.context.sqlState : sqlStateOf(error);
  return typeof state === 'string' && MISSING.has(state);
}

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
    if (missingTable(error)) throw missingInstallIdError(schema, 'no install table', error);
    throw error;
  }
  return installIdOf(rows, schema);
}
