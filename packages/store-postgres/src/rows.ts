import {
  type Headers,
  type InboxRow,
  type JsonValue,
  type MessageState,
  type OutboxRow,
  StoreError,
  stateFromLiteral,
} from '@queuebox/core';

/** The outbox columns every statement that reads rows selects (`id` as text: no driver turns it into a float). */
export const OUTBOX_COLUMNS =
  'id::text AS id, topic, key, payload, headers, state, attempt, max_attempts, scheduled_at, claim_token::text AS claim_token, lease_until, created_at, updated_at, sent_at, last_error, destination';

/** The inbox columns every statement that reads rows selects. */
export const INBOX_COLUMNS =
  'id::text AS id, source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, attempt, max_attempts, scheduled_at, claim_token::text AS claim_token, lease_until, received_at, updated_at, processed_at, last_error';

/** `OUTBOX_COLUMNS` with every column prefixed by a table alias (for UPDATE … RETURNING with a FROM list). */
export function qualified(columns: string, alias: string): string {
  return columns
    .split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');
}

/** A row as pg or PGlite hands it over. */
export type RawRow = Record<string, unknown>;

/** Ids travel as decimal strings; pg gives text for `::text`, PGlite may give number or bigint for int8. */
export function toRowId(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'bigint' || typeof value === 'number') return value.toString();
  throw new StoreError(`Expected a row id, got ${typeof value}`);
}

/** Orders decimal id strings numerically (no leading zeros, so shorter is smaller). */
export function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function toText(value: unknown): string {
  if (typeof value === 'string') return value;
  throw new StoreError(`Expected text, got ${typeof value}`);
}

function toNullableText(value: unknown): string | null {
  return value === null || value === undefined ? null : toText(value);
}

function toInt(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n)) throw new StoreError(`Expected an integer, got ${String(value)}`);
  return n;
}

/** Timestamps: both drivers parse timestamptz into Date; a string is parsed as a fallback. */
function toDate(value: unknown): Date {
  if (value instanceof Date) return value;
  if (typeof value === 'string' || typeof value === 'number') {
    const date = new Date(value);
    if (!Number.isNaN(date.getTime())) return date;
  }
  throw new StoreError(`Expected a timestamp, got ${String(value)}`);
}

function toNullableDate(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}

/** JSONB arrives parsed from both drivers (a JSON string payload arrives as a JS string, so no re-parsing). */
function toJson(value: unknown): JsonValue {
  return value as JsonValue;
}

function toHeaders(value: unknown): Headers {
  const parsed = toJson(value);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
  const headers: Headers = {};
  for (const [name, v] of Object.entries(parsed)) {
    if (v !== null && v !== undefined) headers[name] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  return headers;
}

/** The in-memory state of an outbox literal; an unknown literal is `Failed`. */
export function outboxState(literal: unknown): MessageState {
  return stateFromLiteral('outbox', String(literal));
}

/** The in-memory state of an inbox literal; an unknown literal is `Failed`. */
export function inboxState(literal: unknown): MessageState {
  return stateFromLiteral('inbox', String(literal));
}

/** Maps a row selected with `OUTBOX_COLUMNS`. */
export function toOutboxRow(row: RawRow): OutboxRow {
  return {
    id: toRowId(row.id),
    topic: toText(row.topic),
    key: toNullableText(row.key),
    payload: toJson(row.payload),
    headers: toHeaders(row.headers),
    state: outboxState(row.state),
    attempt: toInt(row.attempt),
    maxAttempts: toInt(row.max_attempts),
    scheduledAt: toDate(row.scheduled_at),
    claimToken: toNullableText(row.claim_token),
    leaseUntil: toNullableDate(row.lease_until),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    sentAt: toNullableDate(row.sent_at),
    lastError: toNullableText(row.last_error),
    destination: toNullableText(row.destination),
  };
}

/** Maps a row selected with `INBOX_COLUMNS`. */
export function toInboxRow(row: RawRow): InboxRow {
  return {
    id: toRowId(row.id),
    source: toText(row.source),
    idempotencyKey: toText(row.idempotency_key),
    eventType: toNullableText(row.event_type),
    aggregateId: toNullableText(row.aggregate_id),
    correlationId: toNullableText(row.correlation_id),
    payload: toJson(row.payload),
    headers: toHeaders(row.headers),
    state: inboxState(row.state),
    attempt: toInt(row.attempt),
    maxAttempts: toInt(row.max_attempts),
    scheduledAt: toDate(row.scheduled_at),
    claimToken: toNullableText(row.claim_token),
    leaseUntil: toNullableDate(row.lease_until),
    receivedAt: toDate(row.received_at),
    processedAt: toNullableDate(row.processed_at),
    lastError: toNullableText(row.last_error),
  };
}
