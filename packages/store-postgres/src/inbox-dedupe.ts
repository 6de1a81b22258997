/**
 * Inbox dedupe: a message is stored once per (source, idempotency key). The unique index answers, not a prior
 * read (`insertInboxStatement`, `insertInboxBatchStatement`, ON CONFLICT DO NOTHING), and a repeat reads the id of
 * the row already there (`selectInboxIdStatement`, `selectInboxIdsStatement`). `storeInboxRow` is one store on its
 * own; inbox-batch.ts groups concurrent stores into one statement.
 *
 * Every statement that answers a repeat writes WAL of its own ({@link SYNCHRONOUS_COMMIT}): a repeat is answered
 * `200 {"status":"duplicate"}`, which tells its sender the message is stored, so its commit must wait for synchronous
 * replication as a new row's does. A transaction that wrote no WAL (an `ON CONFLICT DO NOTHING` that met only
 * repeats, a SELECT) commits without waiting, even with a transaction id (`txid_current()` alone was tried: it
 * writes none). Under `synchronous_standby_names`, a first store whose wait for the standby was cut
 * short (the statement's timeout cancels it, a restart, `pg_terminate_backend`) is committed on the primary only; the
 * sender, answered 503, retried and was answered duplicate at once, and the message was lost when the standby was
 * promoted (an outside failover audit, twice). Now the retry waits for the standby too: 503 while it is away,
 * duplicate once the row is on it. It costs one small WAL record per statement (a batch that stores a message writes
 * its rows anyway); a consumer of logical decoding (CDC) may see them as messages with the prefix `queuebox.repeat`.
 */
import { type NewInboxMessage, StoreError, type StoreResult, storableErrorText } from '@queuebox/core';
import type { SqlExecutor, Statement } from './executor.ts';
import { jsonText, toRowId } from './rows.ts';
import { inboxTable } from './schema-name.ts';

/**
 * A transactional logical-decoding message (prefix `queuebox.repeat`, empty content): the one WAL record a statement
 * that answers repeats writes, so that its commit waits for synchronous replication (this module's comment). Any
 * role may call it, at any `wal_level`. Used as an uncorrelated scalar subquery: written once per statement.
 */
const SYNCHRONOUS_COMMIT = `pg_catalog.pg_logical_emit_message(true, 'queuebox.repeat', '')`;

/**
 * Stores one message, pending (or dead with `lastError`); a repeat of (source, idempotency key) inserts nothing
 * and returns no row. The unique index answers, not a prior read, so two concurrent stores cannot both win.
 */
export function insertInboxStatement(
  schema: string,
  message: NewInboxMessage,
  state: 'pending' | 'dead',
  lastError: string | null,
): Statement {
  return {
    text: `INSERT INTO ${inboxTable(schema)}
  (source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, max_attempts, last_error)
VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7::text::jsonb, $8, $9, $10)
ON CONFLICT (source, idempotency_key) DO NOTHING
RETURNING id::text AS id`,
    values: [
      message.source,
      message.idempotencyKey,
      message.eventType ?? null,
      message.aggregateId ?? null,
      message.correlationId ?? null,
      jsonText(message.payload),
      jsonText(message.headers ?? {}),
      state,
      message.maxAttempts,
      lastError === null ? null : storableErrorText(lastError),
    ],
  };
}

/** One message to store: pending, or dead with its reason. */
export interface InboxInsertItem {
  readonly message: NewInboxMessage;
  readonly state: 'pending' | 'dead';
  readonly lastError: string | null;
}

/** An item of a batched insert, with its payload and headers already serialized (`json`). */
export interface PreparedInboxInsert {
  readonly item: InboxInsertItem;
  readonly payload: string;
  readonly headers: string;
}

/** `item` with its payload and headers as JSON text. */
export function prepareInboxInsert(item: InboxInsertItem): PreparedInboxInsert {
  return { item, payload: jsonText(item.message.payload), headers: jsonText(item.message.headers ?? {}) };
}

/**
 * Stores several messages in one statement, inserted (ids drawn, keys locked) in the order of `callOrder` (each row's
 * rank among the stores' calls; default: the order given), so that a store called before another gets the smaller id:
 * the relay forwards the rows of one aggregate id in id order, and a broker source hands several deliveries of one
 * queue to the store at once (an outside soak saw a RabbitMQ source's messages `…-2` and `…-10` of one aggregate
 * stored in the key text's order, which this statement used to insert in). Two statements in flight whose rows share
 * keys in crossing orders (a sender's repeats of two messages racing their first tries) can deadlock; PostgreSQL fails
 * one, and the group commit stores its messages one by one. (Ids drawn in call order while inserting in key order
 * would need `nextval` on the identity's sequence, a privilege a role that may only read and write the tables lacks.)
 * Each (source, idempotency key) must occur once.
 */
export function insertInboxBatchStatement(
  schema: string,
  rows: readonly PreparedInboxInsert[],
  callOrder?: readonly number[],
): Statement {
  const items = rows.map((r) => r.item);
  const table = inboxTable(schema);
  return {
    text: `WITH input AS (
  SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]),
    pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::text[]),
    pg_catalog.unnest($7::text[]), pg_catalog.unnest($8::text[]), pg_catalog.unnest($9::int[]),
    pg_catalog.unnest($10::text[]), pg_catalog.unnest($11::int[]))
    WITH ORDINALITY AS i(source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state,
                         max_attempts, last_error, call, ord)
  -- WAL of its own even when every message is a repeat, so that its commit waits for synchronous replication
  -- (this module's comment).
  WHERE (SELECT ${SYNCHRONOUS_COMMIT}) IS NOT NULL
), inserted AS (
  INSERT INTO ${table}
    (source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, max_attempts,
     last_error)
  SELECT source, idempotency_key, event_type, aggregate_id, correlation_id, payload::jsonb, headers::jsonb, state,
         max_attempts, last_error
  FROM input ORDER BY call, ord
  ON CONFLICT (source, idempotency_key) DO NOTHING
  RETURNING id, source, idempotency_key
)
SELECT id::text AS id, source, idempotency_key, true AS stored FROM inserted
UNION ALL
-- The statement's snapshot: rows there before it began, never the ones it inserts.
SELECT b.id::text, b.source, b.idempotency_key, false
FROM ${table} b JOIN input i ON b.source = i.source AND b.idempotency_key = i.idempotency_key`,
    values: [
      items.map((i) => i.message.source),
      items.map((i) => i.message.idempotencyKey),
      items.map((i) => i.message.eventType ?? null),
      items.map((i) => i.message.aggregateId ?? null),
      items.map((i) => i.message.correlationId ?? null),
      rows.map((r) => r.payload),
      rows.map((r) => r.headers),
      items.map((i) => i.state),
      items.map((i) => i.message.maxAttempts),
      items.map((i) => (i.lastError === null ? null : storableErrorText(i.lastError))),
      callOrder ?? items.map((_, at) => at),
    ],
  };
}

/** The ids of the rows stored for the (source, idempotency key) pairs. */
export function selectInboxIdsStatement(
  schema: string,
  pairs: readonly { readonly source: string; readonly idempotencyKey: string }[],
): Statement {
  return {
    text: `SELECT id::text AS id, source, idempotency_key FROM ${inboxTable(schema)}
WHERE (source, idempotency_key) IN (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])))
  AND (SELECT ${SYNCHRONOUS_COMMIT}) IS NOT NULL`,
    values: [pairs.map((p) => p.source), pairs.map((p) => p.idempotencyKey)],
  };
}

/** The id of the row stored for (source, idempotency key). */
export function selectInboxIdStatement(schema: string, source: string, idempotencyKey: string): Statement {
  return {
    text: `SELECT id::text AS id FROM ${inboxTable(schema)}
WHERE source = $1 AND idempotency_key = $2 AND (SELECT ${SYNCHRONOUS_COMMIT}) IS NOT NULL`,
    values: [source, idempotencyKey],
  };
}

/**
 * How often `storeInboxRow` tries again when the insert met a conflict but the existing row was gone by the time
 * it was read (deleted by retention in between).
 */
const STORE_ATTEMPTS = 3;

/** Stores one message on its own: the insert, then, for a repeat, the read of the id already there. */
export async function storeInboxRow(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  { message, state, lastError }: InboxInsertItem,
): Promise<StoreResult> {
  for (let attempt = 1; attempt <= STORE_ATTEMPTS; attempt++) {
    const insert = insertInboxStatement(schema, message, state, lastError);
    const inserted = await executor.query<{ id: unknown }>(insert.text, insert.values);
    if (inserted.rows[0]) return { status: 'stored', id: toRowId(inserted.rows[0].id) };
    // A separate statement: its fresh snapshot sees the row a concurrent store committed while we waited on it.
    const select = selectInboxIdStatement(schema, message.source, message.idempotencyKey);
    const existing = await executor.query<{ id: unknown }>(select.text, select.values);
    if (existing.rows[0]) return { status: 'duplicate', id: toRowId(existing.rows[0].id) };
  }
  throw new StoreError('The inbox row of a repeated message vanished between insert and read, repeatedly', {
    context: { source: message.source },
  });
}
