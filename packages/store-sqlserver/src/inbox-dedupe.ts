/**
 * Inbox dedupe: a message is stored once per (source, idempotency key). The unique constraint answers, not a prior
 * read (`insertInboxStatement` fails with error 2627 on a repeat), and a repeat reads the id of the row already
 * there (`selectInboxIdStatement`); `storeInboxRow` is the store's `store`. As in outbox-sql.ts, an OUTPUT clause
 * sits alone on its line.
 */
import { type NewInboxMessage, StoreError, type StoreResult, storableErrorText } from '@queuebox/core';
import mssql from 'mssql';
import { isUniqueViolation } from './errors.ts';
import type { SqlExecutor, SqlParam, Statement } from './executor.ts';
import { toRowId } from './rows.ts';
import { inboxTable } from './schema-name.ts';

/** Text into an NVARCHAR column: sent as NVARCHAR(MAX), so an over-long value fails (2628) instead of being cut. */
function text(value: string | null | undefined): SqlParam {
  return { type: mssql.NVarChar(mssql.MAX), value: value ?? null };
}

/**
 * Stores one message, pending (or dead with `lastError`). A repeat of (source, idempotency key) fails on the
 * unique constraint inbox_source_idempotency_key_uq with error 2627, and the store then reads the existing id
 * (`selectInboxIdStatement`): the constraint answers, not a prior read, so two concurrent stores cannot both win.
 * (PostgreSQL's ON CONFLICT DO NOTHING has no T-SQL counterpart that avoids a range lock.)
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
OUTPUT inserted.id
VALUES (@source, @idempotencyKey, @eventType, @aggregateId, @correlationId, @payload, @headers, @state, @maxAttempts, @lastError);`,
    values: {
      source: text(message.source),
      idempotencyKey: text(message.idempotencyKey),
      eventType: text(message.eventType),
      aggregateId: text(message.aggregateId),
      correlationId: text(message.correlationId),
      payload: text(JSON.stringify(message.payload)),
      headers: text(JSON.stringify(message.headers ?? {})),
      state: { type: mssql.NVarChar(50), value: state },
      maxAttempts: { type: mssql.Int, value: message.maxAttempts },
      lastError: text(lastError === null ? null : storableErrorText(lastError)),
    },
  };
}

/**
 * The id of the row stored for (source, idempotency key): equal in the binary collation and of the same byte
 * lengths, which the unique key inbox_source_idempotency_key_uq also holds (trailing spaces count).
 */
export function selectInboxIdStatement(schema: string, source: string, idempotencyKey: string): Statement {
  return {
    text: `SELECT id FROM ${inboxTable(schema)}
WHERE source = @source AND idempotency_key = @idempotencyKey
  AND source_bytes = DATALENGTH(@source) AND idempotency_key_bytes = DATALENGTH(@idempotencyKey);`,
    values: {
      source: { type: mssql.NVarChar(200), value: source },
      idempotencyKey: { type: mssql.NVarChar(600), value: idempotencyKey },
    },
  };
}

/** One message to store: pending, or dead with its reason. */
export interface InboxInsertItem {
  readonly message: NewInboxMessage;
  readonly state: 'pending' | 'dead';
  readonly lastError: string | null;
}

/**
 * How often `storeInboxRow` tries again when the insert met the unique constraint but the existing row was gone
 * by the time it was read (deleted by retention in between).
 */
const STORE_ATTEMPTS = 3;

/** Stores one message: the insert, then, for a repeat (error 2627), the read of the id already there. */
export async function storeInboxRow(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  { message, state, lastError }: InboxInsertItem,
): Promise<StoreResult> {
  for (let attempt = 1; attempt <= STORE_ATTEMPTS; attempt++) {
    const insert = insertInboxStatement(schema, message, state, lastError);
    try {
      const inserted = await executor.query<{ id: unknown }>(insert.text, insert.values);
      if (inserted.rows[0]) return { status: 'stored', id: toRowId(inserted.rows[0].id) };
      throw new StoreError('The inbox insert answered no id');
    } catch (error) {
      // Error 2627 on inbox_source_idempotency_key_uq: a repeat. Anything else is a real failure.
      if (!isUniqueViolation(error)) throw error;
    }
    const select = selectInboxIdStatement(schema, message.source, message.idempotencyKey);
    const existing = await executor.query<{ id: unknown }>(select.text, select.values);
    if (existing.rows[0]) return { status: 'duplicate', id: toRowId(existing.rows[0].id) };
  }
  throw new StoreError('The inbox row of a repeated message vanished between insert and read, repeatedly', {
    context: { source: message.source },
  });
}
