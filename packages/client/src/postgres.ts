/**
 * enqueue on PostgreSQL: store-postgres's `lockOutboxKeysStatement` and `insertOutboxStatement` — the statements
 * of the store's own insert — run on the application's own client, inside its transaction.
 *
 * The builders are imported from their own modules, never from the package's index: the index loads the store
 * (store.ts), which imports `pg` at the top, and a query function (postgres.js, Knex, Drizzle, …) must work in an
 * application that has no `pg` installed.
 */
import type { NewOutboxMessage, RowId } from '@queuebox/core';
import type { Statement } from '@queuebox/store-postgres';
import { translateError } from '@queuebox/store-postgres/errors';
import {
  enqueueGuardStatement,
  enqueueOutboxStatement,
  guardedEnqueueStatement,
} from '@queuebox/store-postgres/outbox-sql';
import { quoteSchema } from '@queuebox/store-postgres/schema-name';
import { TransactionRequiredError } from './errors.ts';
import { OUTBOX_CHANNEL } from './lock-names.ts';
import { rowsOf, type SqlQueryable } from './queryable.ts';
import type { PgTransactionClient } from './transaction.ts';

/** Anything with pg's `query(text, values)`; rows are read only where the statement answers some. */
interface PgQueryable {
  query(text: string, values: unknown[]): PromiseLike<unknown>;
}

/** A wake-up for the outbox poller: `pg_catalog.pg_notify('queuebox_outbox', <schema>)`. */
export function notifyOutboxStatement(schema: string): Statement {
  quoteSchema(schema);
  return { text: 'SELECT pg_catalog.pg_notify($1, $2)', values: [OUTBOX_CHANNEL, schema] };
}

/**
 * The statements of one enqueue: one, which takes the key locks (when a message has a key; held until the
 * application's transaction ends, so a second writer of a key draws its id only after the first has committed)
 * before it inserts (`enqueueOutboxStatement`): one round trip added to the application's transaction.
 */
export function enqueueStatements(schema: string, messages: readonly NewOutboxMessage[]): Statement[] {
  return [enqueueOutboxStatement(schema, messages)];
}

async function run(client: PgQueryable, statement: Statement): Promise<unknown[]> {
  try {
    return rowsOf(await client.query(statement.text, [...statement.values]));
  } catch (error) {
    throw translateError(error);
  }
}

function compareIds(a: RowId, b: RowId): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Runs the statements of one enqueue on `client` and answers the new ids in the order of `messages`. */
export async function enqueueOnPostgres(
  client: PgTransactionClient,
  schema: string,
  messages: readonly NewOutboxMessage[],
): Promise<RowId[]> {
  const statements = enqueueStatements(schema, messages);
  let rows: unknown[] = [];
  for (const statement of statements) rows = await run(client, statement);
  return idsOf(rows);
}

/** The ids the insert answered, in insert order: identities grow in insert order, and it inserts in the order given. */
function idsOf(rows: readonly unknown[]): RowId[] {
  return rows.map((r) => String((r as { id: unknown }).id)).sort(compareIds);
}

/**
 * Runs one enqueue through a driver whose transaction state cannot be asked: `enqueueGuardStatement` reads the
 * transaction's id, then `guardedEnqueueStatement` writes only if it runs in that same transaction — that is, if
 * both ran in one open transaction. Otherwise nothing was written (no row, no lock left held) and it throws
 * `TransactionRequiredError`. Two round trips instead of one.
 */
export async function enqueueOnQueryable(
  queryable: SqlQueryable,
  schema: string,
  messages: readonly NewOutboxMessage[],
): Promise<RowId[]> {
  const [first] = await run(queryable, enqueueGuardStatement());
  const transactionId = (first as { guard?: unknown } | undefined)?.guard;
  if (typeof transactionId !== 'string') {
    throw new TransactionRequiredError(
      "enqueue could not read its transaction's id: the query function must answer the statement's rows (an array, or an object with rows)",
    );
  }
  const rows = await run(queryable, guardedEnqueueStatement(schema, messages, transactionId));
  if (rows.length === 0) {
    throw new TransactionRequiredError(
      'enqueue wrote nothing: its two statements did not run in one open transaction (the query function runs each in a transaction of its own, as a pool or a connection outside BEGIN does). Pass a query function that runs on the transaction of the business write',
    );
  }
  return idsOf(rows);
}

/** Runs `pg_catalog.pg_notify('queuebox_outbox', schema)` on `client`. */
export async function notifyOnPostgres(client: PgQueryable, schema: string): Promise<void> {
  await run(client, notifyOutboxStatement(schema));
}
