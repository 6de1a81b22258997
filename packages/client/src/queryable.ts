/**
 * Any PostgreSQL driver or ORM as `enqueue` takes it: one function that runs a statement inside the application's
 * transaction (`SqlQueryable`), and `sqlTemplate`, which makes one from a driver's tagged template.
 */

/**
 * A connection of any driver inside the application's open transaction, as one function: `query(text, values)`
 * runs one PostgreSQL statement with `$1, $2, …` placeholders and answers its rows, as an array or as an object
 * with `rows` (what pg, Kysely and Drizzle on node-postgres answer). Every value `enqueue` sends this way is a
 * string (arrays as PostgreSQL array literals), so no driver needs to know a type. Whether the two statements it
 * sends really share one open transaction is checked by the database (`guardedEnqueueStatement`), not trusted.
 */
export interface SqlQueryable {
  query(text: string, values: unknown[]): PromiseLike<unknown>;
  /**
   * Only a `pg.Pool` has it: a pool is not a transaction. (These `never` members make what enqueue refuses at run
   * time by shape a type error too: a pool, or a handle that opens transactions itself.)
   */
  readonly totalCount?: never;
  /**
   * Only a handle that opens transactions has it (a TypeORM `DataSource` or `EntityManager`, PGlite, an mssql
   * `ConnectionPool`): pass the transaction it opens, as a query function.
   */
  readonly transaction?: never;
}

/** A driver's tagged template (`sql`…``, `$queryRaw`…``), called as JavaScript calls a tag. */
export type SqlTag = (strings: TemplateStringsArray, ...values: unknown[]) => PromiseLike<unknown>;

/** A `$` followed by digits: a placeholder of QueueBox's own statements (they hold no other `$`). */
const PLACEHOLDER = /\$(\d+)/g;

/**
 * The strings and values of `text` as a tagged template: the text split at each `$n`, and `values[n - 1]` for
 * each placeholder in the order they occur (a placeholder used twice gives its value twice).
 */
export function templateOf(
  text: string,
  values: readonly unknown[],
): { strings: TemplateStringsArray; values: unknown[] } {
  const pieces: string[] = [];
  const ordered: unknown[] = [];
  let from = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    const index = Number(match[1]) - 1;
    if (!(index >= 0 && index < values.length)) {
      throw new RangeError(`placeholder ${match[0]} has no value (${values.length} given)`);
    }
    pieces.push(text.slice(from, match.index));
    ordered.push(values[index]);
    from = match.index + match[0].length;
  }
  pieces.push(text.slice(from));
  const strings = Object.freeze(Object.assign(pieces, { raw: Object.freeze([...pieces]) }));
  return { strings: strings as unknown as TemplateStringsArray, values: ordered };
}

/**
 * A `SqlQueryable` from a driver's tagged template, for drivers that take parameters that way: postgres.js's
 * transaction `sql`, Drizzle's `sql` with `tx.execute`, Prisma's `tx.$queryRaw`, or Knex
 * (`(strings, ...values) => trx.raw(strings.join('?'), values)`). Each statement is handed to `tag` as if it
 * had been written as a template literal with its values in place of `$1, $2, …`.
 */
export function sqlTemplate(tag: SqlTag): SqlQueryable {
  if (typeof tag !== 'function') {
    throw new TypeError(
      'sqlTemplate takes a function called as a tagged template: (strings, ...values) => …',
    );
  }
  return {
    query(text, values) {
      const template = templateOf(text, values);
      return tag(template.strings, ...template.values);
    },
  };
}

/** The rows of a driver's answer: the array itself, or its `rows` (pg's `Result`, Kysely's `QueryResult`). */
export function rowsOf(result: unknown): unknown[] {
  if (Array.isArray(result)) return result;
  const rows = (result as { rows?: unknown } | null | undefined)?.rows;
  return Array.isArray(rows) ? rows : [];
}
