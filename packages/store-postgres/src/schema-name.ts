import { ConfigError, SCHEMA_NAME_PATTERN, SCHEMA_NAME_RULE } from '@queuebox/core';

/** The default schema of both tables. */
export const DEFAULT_SCHEMA = 'queuebox';

/** What both databases accept as a schema name: a letter or `_`, then letters, digits, `_`; 63 at most. */
const SCHEMA_NAME = SCHEMA_NAME_PATTERN;

/**
 * The schema name quoted for SQL (`"queuebox"`), after checking it against `^[A-Za-z_][A-Za-z0-9_]{0,62}$`;
 * anything else is refused with a `ConfigError` on `database.schema`, so no name can inject SQL. Quoting keeps
 * the case as written.
 */
export function quoteSchema(schema: string): string {
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema)) {
    throw new ConfigError([
      {
        path: 'database.schema',
        message: `${JSON.stringify(schema)} ${SCHEMA_NAME_RULE}`,
      },
    ]);
  }
  return `"${schema}"`;
}

/** `"schema".outbox`, the schema checked by {@link quoteSchema}. */
export function outboxTable(schema: string): string {
  return `${quoteSchema(schema)}.outbox`;
}

/** `"schema".inbox`, the schema checked by {@link quoteSchema}. */
export function inboxTable(schema: string): string {
  return `${quoteSchema(schema)}.inbox`;
}
