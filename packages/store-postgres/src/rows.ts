import { type JsonValue, StoreError } from '@queuebox/core';
import { type ColumnReaders, createRowMappers, SessionValueError } from '@queuebox/sql-store-common';

export { compareIds, inboxState, outboxState, qualified, type RawRow } from '@queuebox/sql-store-common';

/**
 * A payload or headers value as JSON text, cast to jsonb in SQL, so a JSON string payload stays a string.
 * `JSON.stringify(undefined)` is undefined; NULL then hits the NOT NULL constraint with a clear error.
 */
export function jsonText(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? (null as unknown as string) : text;
}

/** The outbox columns every statement that reads rows selects (`id` as text: no driver turns it into a float). */
export const OUTBOX_COLUMNS =
  'id::text AS id, topic, key, payload, headers, state, attempt, max_attempts, scheduled_at, claim_token::text AS claim_token, lease_until, created_at, updated_at, sent_at, last_error, destination, message_uid::text AS message_uid';

/** The inbox columns every statement that reads rows selects. */
export const INBOX_COLUMNS =
  'id::text AS id, source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, attempt, max_attempts, scheduled_at, claim_token::text AS claim_token, lease_until, received_at, updated_at, processed_at, last_error';

/** Ids travel as decimal strings; pg gives text for `::text`, PGlite may give number or bigint for int8. */
export function toRowId(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'bigint' || typeof value === 'number') return value.toString();
  throw new StoreError(`Expected a row id, got ${typeof value}`);
}

/**
 * Timestamps: both drivers parse timestamptz into Date; a string is parsed as a fallback. A NOT NULL column read as
 * null is the session's doing (its `DateStyle` is not ISO, so the parser read nothing): a `SessionValueError`.
 */
function toDate(value: unknown): Date {
  // 'infinity' / '-infinity' (pg's parser answers them as numbers), written by plain SQL to park a row: the last or
  // first instant a Date holds, so that the row can be listed and read like any other.
  if (value === Number.POSITIVE_INFINITY) return new Date(8.64e15);
  if (value === Number.NEGATIVE_INFINITY) return new Date(-8.64e15);
  if (value === null || value === undefined) {
    throw new SessionValueError(
      'A timestamp column read as nothing: the session answers timestamps in a style QueueBox cannot read; its DateStyle must be ISO (the store sets it on each connection: a pooler or a driver option may have changed it)',
    );
  }
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value;
  if (typeof value === 'string' || typeof value === 'number') {
    const date = new Date(value);
    if (!Number.isNaN(date.getTime())) return date;
  }
  throw new StoreError(`Expected a timestamp, got ${String(value)}`);
}

/** JSONB arrives parsed from both drivers (a JSON string payload arrives as a JS string, so no re-parsing). */
function toJson(value: unknown): JsonValue {
  return value as JsonValue;
}

/** `claim_token::text` is the uuid's lower-case text already. */
function toClaimToken(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  throw new StoreError(`Expected text, got ${typeof value}`);
}

/** How pg and PGlite hand the columns over that drivers differ in. */
export const POSTGRES_READERS: ColumnReaders = { toRowId, toJson, toDate, toClaimToken };

/** Maps a row selected with `OUTBOX_COLUMNS` / `INBOX_COLUMNS` (see sql-store-common's `createRowMappers`). */
export const { toOutboxRow, toInboxRow } = createRowMappers(POSTGRES_READERS);
