import {
  type Headers,
  type InboxRow,
  type JsonValue,
  type MessageState,
  type OutboxRow,
  StoreError,
  stateFromLiteral,
} from '@queuebox/core';

// How mssql (tedious) hands columns over: BIGINT as a decimal string (tedious never narrows it to a number),
// INT as a number, DATETIME2 as a Date read as UTC (tedious' `useUTC` default), UNIQUEIDENTIFIER as an
// upper-case string, NVARCHAR(MAX) JSON as text, NULL as null.

/** The outbox columns every statement that reads rows selects, in table order (`[key]` is a reserved word). */
export const OUTBOX_COLUMNS =
  'id, topic, [key], payload, headers, state, attempt, max_attempts, scheduled_at, claim_token, lease_until, created_at, updated_at, sent_at, last_error, destination';

/** The inbox columns every statement that reads rows selects, in table order. */
export const INBOX_COLUMNS =
  'id, source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, attempt, max_attempts, scheduled_at, claim_token, lease_until, received_at, updated_at, processed_at, last_error';

/** The columns with every column prefixed by a table alias, e.g. `inserted` for an OUTPUT clause. */
export function qualified(columns: string, alias: string): string {
  return columns
    .split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');
}

/** A row as mssql hands it over. */
export type RawRow = Record<string, unknown>;

/** Ids travel as decimal strings; tedious gives BIGINT as a string already, a number or bigint is converted. */
export function toRowId(value: unknown): string {
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isSafeInteger(value)) return value.toString();
  throw new StoreError(
    `Expected a row id, got ${typeof value === 'string' ? JSON.stringify(value) : typeof value}`,
  );
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

/**
 * DATETIME2 holds UTC without a zone. mssql gives a Date already read as UTC; a string (a driver configured
 * otherwise) is read as UTC too, unless it names its own offset.
 */
export function toUtcDate(value: unknown): Date {
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value;
  if (typeof value === 'string') {
    const text = value.trim().replace(' ', 'T');
    const date = new Date(/(Z|[+-]\d\d:?\d\d)$/i.test(text) ? text : `${text}Z`);
    if (!Number.isNaN(date.getTime())) return date;
  }
  throw new StoreError(`Expected a timestamp, got ${String(value)}`);
}

function toNullableDate(value: unknown): Date | null {
  return value === null || value === undefined ? null : toUtcDate(value);
}

/** Claim tokens in lower case, as PostgreSQL's uuid text has them; SQL Server answers upper case. */
export function toClaimToken(value: unknown): string | null {
  return value === null || value === undefined ? null : toText(value).toLowerCase();
}

/** NVARCHAR(MAX) JSON arrives as text and is parsed here. */
function toJson(value: unknown, column: string): JsonValue {
  try {
    return JSON.parse(toText(value)) as JsonValue;
  } catch (error) {
    if (error instanceof StoreError) throw error;
    throw new StoreError(`The ${column} column does not hold JSON`, { cause: error });
  }
}

function toHeaders(value: unknown): Headers {
  const parsed = toJson(value, 'headers');
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
    payload: toJson(row.payload, 'payload'),
    headers: toHeaders(row.headers),
    state: outboxState(row.state),
    attempt: toInt(row.attempt),
    maxAttempts: toInt(row.max_attempts),
    scheduledAt: toUtcDate(row.scheduled_at),
    claimToken: toClaimToken(row.claim_token),
    leaseUntil: toNullableDate(row.lease_until),
    createdAt: toUtcDate(row.created_at),
    updatedAt: toUtcDate(row.updated_at),
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
    payload: toJson(row.payload, 'payload'),
    headers: toHeaders(row.headers),
    state: inboxState(row.state),
    attempt: toInt(row.attempt),
    maxAttempts: toInt(row.max_attempts),
    scheduledAt: toUtcDate(row.scheduled_at),
    claimToken: toClaimToken(row.claim_token),
    leaseUntil: toNullableDate(row.lease_until),
    receivedAt: toUtcDate(row.received_at),
    processedAt: toNullableDate(row.processed_at),
    lastError: toNullableText(row.last_error),
  };
}
