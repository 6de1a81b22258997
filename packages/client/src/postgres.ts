/**
 * enqueue on PostgreSQL: the key locks (this package's statements) and store-postgres's `insertOutboxStatement`,
 * run on the application's own client, inside its transaction.
 */
import type { NewOutboxMessage, RowId } from '@queuebox/core';
import { insertOutboxStatement, quoteSchema, type Statement, translateError } from '@queuebox/store-postgres';
import { OUTBOX_CHANNEL, outboxKeyLockName } from './lock-names.ts';
import { distinctKeys } from './message.ts';
import type { PgTransactionClient } from './transaction.ts';

/** Anything with pg's `query(text, values)`; rows are read only where the statement answers some. */
interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/**
 * Takes the transaction-scoped advisory lock of each key, in the order given (callers sort them, so two writers
 * never wait on each other in a cycle). The lock is held until the application's transaction commits or rolls
 * back, so a second writer of the same key inserts (and draws its id) only after the first has committed: ids
 * of one key grow in commit order, which is the order the claim delivers. Writers of other keys do not wait.
 */
export function lockOutboxKeysStatement(schema: string, keys: readonly string[]): Statement {
  quoteSchema(schema);
  return {
    // Rows of an unnest come out in array order, and count() evaluates its argument for each of them in turn.
    text: `SELECT count(pg_advisory_xact_lock(hashtextextended(k.name, 0)))::int AS locked
FROM unnest($1::text[]) AS k(name)`,
    values: [keys.map((key) => outboxKeyLockName(schema, key))],
  };
}

/** A wake-up for the outbox poller: `pg_notify('queuebox_outbox', <schema>)`. */
export function notifyOutboxStatement(schema: string): Statement {
  quoteSchema(schema);
  return { text: 'SELECT pg_notify($1, $2)', values: [OUTBOX_CHANNEL, schema] };
}

/** The statements of one enqueue, in order: the key locks (when a message has a key), then the insert. */
export function enqueueStatements(schema: string, messages: readonly NewOutboxMessage[]): Statement[] {
  const keys = distinctKeys(messages);
  const insert = insertOutboxStatement(schema, messages);
  return keys.length > 0 ? [lockOutboxKeysStatement(schema, keys), insert] : [insert];
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
