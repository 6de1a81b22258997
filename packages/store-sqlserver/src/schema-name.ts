import { ConfigError, SCHEMA_NAME_PATTERN, SCHEMA_NAME_RULE } from '@queuebox/core';

/** The default schema of both tables. */
export const DEFAULT_SCHEMA = 'queuebox';

/** What both databases accept as a schema name: a letter or `_`, then letters, digits, `_`; 63 at most. */
const SCHEMA_NAME = SCHEMA_NAME_PATTERN;

/**
 * The schema name quoted for T-SQL (`[queuebox]`), after checking it against `^[A-Za-z_][A-Za-z0-9_]{0,62}$`;
 * anything else is refused with a `ConfigError` on `database.schema`. The pattern leaves no character that could
 * close a `[…]` identifier or an `N'…'` literal, which is what makes the name safe to place in statement text.
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
  return `[${schema}]`;
}

/**
 * The tables of one schema as statement text names them. SQL Server has no search_path, so every statement
 * names its table with the schema.
 */
export interface Tables {
  /** The schema name as configured (validated, not quoted). */
  readonly schema: string;
  /** `[schema].[outbox]` */
  readonly outbox: string;
  /** `[schema].[inbox]` */
  readonly inbox: string;
  /** `[schema].[schema_migrations]` */
  readonly schemaMigrations: string;
}

/** The table names of `schema` (validated by {@link quoteSchema}; default `queuebox`). */
export function tablesOf(schema: string = DEFAULT_SCHEMA): Tables {
  const quoted = quoteSchema(schema);
  return {
    schema,
    outbox: `${quoted}.[outbox]`,
    inbox: `${quoted}.[inbox]`,
    schemaMigrations: `${quoted}.[schema_migrations]`,
  };
}

/** `[schema].[outbox]`, the schema checked by {@link quoteSchema}. */
export function outboxTable(schema: string): string {
  return `${quoteSchema(schema)}.[outbox]`;
}

/** `[schema].[inbox]`, the schema checked by {@link quoteSchema}. */
export function inboxTable(schema: string): string {
  return `${quoteSchema(schema)}.[inbox]`;
}
