/**
 * One database schema per test file: a unique name, dropped after the file when every test passed and kept
 * (named on the console) when any failed, so the rows of the failure can be inspected.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach } from 'vitest';

/** What both databases accept as an unquoted-safe identifier (see SCHEMA.md). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * A unique schema name `t_<prefix>_<random>`, valid on PostgreSQL and SQL Server (lower case, at most 63
 * characters). The prefix is lower-cased and anything outside `[a-z0-9_]` becomes `_`.
 */
export function freshSchemaName(prefix: string): string {
  const clean = prefix
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')
    .slice(0, 40);
  const name = `t_${clean}_${randomBytes(5).toString('hex')}`;
  if (!IDENTIFIER.test(name)) throw new Error(`Not a valid schema name: ${name}`);
  return name;
}

/** Throws unless `name` is a valid schema identifier; returns it for chaining into quoting. */
export function assertSchemaName(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`Not a valid schema name: ${JSON.stringify(name)}`);
  return name;
}

/** The statement that drops a PostgreSQL (or PGlite) schema and everything in it. */
export function dropPostgresSchemaStatement(schema: string): { text: string; values: [] } {
  return { text: `DROP SCHEMA IF EXISTS "${assertSchemaName(schema)}" CASCADE`, values: [] };
}

/**
 * The batch that drops a SQL Server schema and everything in it (SQL Server has no `DROP SCHEMA … CASCADE`):
 * foreign keys, views, procedures and functions (which may be schema-bound to tables), tables, sequences and
 * types first, then the schema. The schema name travels as the `@schema` parameter.
 *
 * Each kind of object is gathered with `STRING_AGG` (SQL Server 2017+), whose result over every row is
 * documented; `SELECT @sql += … FROM …` is not (its accumulation across rows is undefined, and Babelfish keeps
 * only the last row, which left test schemas behind). The pieces are cast to NVARCHAR(MAX) first, because
 * STRING_AGG of shorter inputs fails past 8,000 bytes. An empty aggregate is NULL, hence the COALESCE.
 */
export function dropSqlServerSchemaStatement(schema: string): { text: string; values: { schema: string } } {
  const part = (select: string) => `COALESCE((${select}), N'')`;
  const agg = (expression: string) => `STRING_AGG(CAST(${expression} AS NVARCHAR(MAX)), N'')`;
  const drop = (what: string, from: string) =>
    part(
      `SELECT ${agg(`N'DROP ${what} ' + QUOTENAME(@schema) + N'.' + QUOTENAME(o.name) + N';'`)} FROM ${from}`,
    );
  return {
    text: `
DECLARE @sql NVARCHAR(MAX) = ${part(
      `SELECT ${agg(
        "N'ALTER TABLE ' + QUOTENAME(@schema) + N'.' + QUOTENAME(t.name) + N' DROP CONSTRAINT ' + QUOTENAME(f.name) + N';'",
      )} FROM sys.foreign_keys AS f INNER JOIN sys.tables AS t ON t.object_id = f.parent_object_id WHERE t.schema_id = SCHEMA_ID(@schema)`,
    )}
  + ${drop('VIEW', 'sys.views AS o WHERE o.schema_id = SCHEMA_ID(@schema)')}
  + ${drop('PROCEDURE', 'sys.procedures AS o WHERE o.schema_id = SCHEMA_ID(@schema)')}
  + ${drop('FUNCTION', "sys.objects AS o WHERE o.type IN ('FN', 'IF', 'TF') AND o.schema_id = SCHEMA_ID(@schema)")}
  + ${drop('TABLE', 'sys.tables AS o WHERE o.schema_id = SCHEMA_ID(@schema)')}
  + ${drop('SEQUENCE', 'sys.sequences AS o WHERE o.schema_id = SCHEMA_ID(@schema)')}
  + ${drop('TYPE', 'sys.types AS o WHERE o.is_user_defined = 1 AND o.schema_id = SCHEMA_ID(@schema)')};
IF SCHEMA_ID(@schema) IS NOT NULL SET @sql = @sql + N'DROP SCHEMA ' + QUOTENAME(@schema) + N';';
EXEC sp_executesql @sql;`,
    values: { schema: assertSchemaName(schema) },
  };
}

/** Records whether any test of the current file (or describe block) failed. */
export interface FailureWatch {
  /** True once any test of the scope failed, or a hook of the scope did. */
  readonly failed: boolean;
}

/**
 * Watches the tests of the current scope (call it at the top of a file or inside a `describe`): a test whose
 * result is `fail` when its `afterEach` runs, or a failing `beforeAll` of the scope, sets `failed`.
 * Call it before registering hooks that read it, so its `afterEach` runs first.
 */
export function watchFailures(): FailureWatch {
  const watch = { failed: false };
  afterEach((context) => {
    if (context.task.result?.state === 'fail') watch.failed = true;
  });
  // biome-ignore lint/correctness/noEmptyPattern: vitest requires a destructuring pattern for the hook context
  afterAll(({}, suite) => {
    // A failing beforeAll marks the suite failed and skips its tests, so no afterEach saw it.
    if (suite.result?.state === 'fail' || (suite.result?.errors?.length ?? 0) > 0) watch.failed = true;
  });
  return watch;
}

/** What `useSchema` needs from the test file: how to drop a schema on its database. */
export interface UseSchemaOptions {
  /** Drops the schema and everything in it; see `dropPostgresSchemaStatement` / `dropSqlServerSchemaStatement`. */
  drop(schema: string): Promise<void>;
}

/** The schema of one test file. */
export interface TestSchema {
  readonly name: string;
  /** Whether a test of the file failed so far. */
  readonly failed: boolean;
}

/**
 * Gives the calling test file a fresh schema name (`t_<prefix>_<random>`) and, after the file, drops the schema
 * when all its tests passed, or keeps it and prints its name when any failed. The file creates the schema
 * itself (usually by migrating a store into it).
 */
export function useSchema(prefix: string, options: UseSchemaOptions): TestSchema {
  const name = freshSchemaName(prefix);
  const watch = watchFailures();
  afterAll(async () => {
    await settleSchema(name, watch.failed, options.drop);
  });
  return {
    name,
    get failed() {
      return watch.failed;
    },
  };
}

/** Drops `schema`, or keeps it with a console line when `failed`. Used by `useSchema` and the contract suites. */
export async function settleSchema(
  schema: string,
  failed: boolean,
  drop: (schema: string) => Promise<void>,
  why = 'a test failed',
): Promise<void> {
  if (failed) {
    console.info(`[test schema] keeping schema ${schema} for inspection: ${why}`);
    return;
  }
  await drop(schema);
}

/**
 * A `pg` pool of `poolSize` connections on `url` and a fresh schema (`useSchema`) for the calling file or describe
 * block: after the tests the schema is dropped through the pool (kept and named when a test failed), then the pool
 * ends.
 */
export function usePostgresSchema(
  url: string,
  prefix: string,
  poolSize = 1,
): { readonly pool: pg.Pool; readonly schema: TestSchema } {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  // afterAll hooks run in reverse order of registration: the schema is dropped first, then the pool ends.
  afterAll(async () => {
    await pool.end();
  });
  const schema = useSchema(prefix, {
    drop: async (name) => {
      await pool.query(dropPostgresSchemaStatement(name).text);
    },
  });
  return { pool, schema };
}
