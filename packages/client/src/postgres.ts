/**
 * enqueue on PostgreSQL: store-postgres's `lockOutboxKeysStatement` and `insertOutboxStatement` — the statements
 * of the store's own insert — run on the application's own client, inside its transaction.
 */
import type { NewOutboxMessage, RowId } from '@queuebox/core';
import {
  enqueueOutboxStatement,
  quoteSchema,
  type Statement,
  translateError,
} from '@queuebox/store-postgres';
import { OUTBOX_CHANNEL } from './lock-names.ts';
import type { PgTransactionClient } from './transaction.ts';

/** Anything with pg's `query(text, values)`; rows are read only where the statement answers some. */
interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/** A wake-up for the outbox poller: `pg_notify('queuebox_outbox', <schema>)`. */
export function notifyOutboxStatement(schema: string): Statement {
  quoteSchema(schema);
  return { text: 'SELECT pg_notify($1, $2)', values: [OUTBOX_CHANNEL, schema] };
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
    const result = (await client.query(statement.text, [...statement.values])) as { rows?: unknown[] };
    return result.rows ?? [];
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
  // Identities grow in insert order, and the insert inserts in the order given.
  return rows.map((r) => String((r as { id: unknown }).id)).sort(compareIds);
}

/** Runs `pg_notify('queuebox_outbox', schema)` on `client`. */
export async function notifyOnPostgres(client: PgQueryable, schema: string): Promise<void> {
  await run(client, notifyOutboxStatement(schema));
}
