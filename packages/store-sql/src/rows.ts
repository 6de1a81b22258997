import {
  type Headers,
  type InboxRow,
  type MessageState,
  type OutboxRow,
  StoreError,
  stateFromLiteral,
} from '@queuebox/core';
import type { ColumnReaders } from './dialect.ts';

/** A row as a driver hands it over: column name to value. */
export type RawRow = Record<string, unknown>;

/** Orders decimal id strings numerically (no leading zeros, so shorter is smaller). */
export function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** A column list (`a, b, c`) with every column prefixed by a table alias (`t.a, t.b, t.c`). */
export function qualified(columns: string, alias: string): string {
  return columns
    .split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');
}

/** The in-memory state of an outbox literal; an unknown literal is `Failed`. */
export function outboxState(literal: unknown): MessageState {
  return stateFromLiteral('outbox', String(literal));
}

/** The in-memory state of an inbox literal; an unknown literal is `Failed`. */
export function inboxState(literal: unknown): MessageState {
  return stateFromLiteral('inbox', String(literal));
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

/** Turns rows selected with a dialect's outbox and inbox column lists into core's row types. */
export interface RowMappers {
  /** Maps a row selected with the dialect's `OUTBOX_COLUMNS`. */
  readonly toOutboxRow: (row: RawRow) => OutboxRow;
  /** Maps a row selected with the dialect's `INBOX_COLUMNS`. */
  readonly toInboxRow: (row: RawRow) => InboxRow;
}

/**
 * The row mappers of a dialect, reading ids, JSON, timestamps and claim tokens with its `readers`; text, integer,
 * header and state columns read the same on every driver. Header values that are not strings become their JSON
 * text, null ones are dropped, and headers that are not a JSON object read as `{}`. Unknown state literals read
 * as `Failed`.
 */
export function createRowMappers(readers: ColumnReaders): RowMappers {
  const { toRowId, toJson, toDate, toClaimToken } = readers;
  const toNullableDate = (value: unknown): Date | null =>
    value === null || value === undefined ? null : toDate(value);

  function toHeaders(value: unknown): Headers {
    const parsed = toJson(value, 'headers');
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
    const headers: Headers = {};
    for (const [name, v] of Object.entries(parsed)) {
      if (v !== null && v !== undefined) headers[name] = typeof v === 'string' ? v : JSON.stringify(v);
    }
    return headers;
  }

  return {
    toOutboxRow: (row) => ({
      id: toRowId(row.id),
      topic: toText(row.topic),
      key: toNullableText(row.key),
      payload: toJson(row.payload, 'payload'),
      headers: toHeaders(row.headers),
      state: outboxState(row.state),
      attempt: toInt(row.attempt),
      maxAttempts: toInt(row.max_attempts),
      scheduledAt: toDate(row.scheduled_at),
      claimToken: toClaimToken(row.claim_token),
      leaseUntil: toNullableDate(row.lease_until),
      createdAt: toDate(row.created_at),
      updatedAt: toDate(row.updated_at),
      sentAt: toNullableDate(row.sent_at),
      lastError: toNullableText(row.last_error),
      destination: toNullableText(row.destination),
    }),
    toInboxRow: (row) => ({
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
      scheduledAt: toDate(row.scheduled_at),
      claimToken: toClaimToken(row.claim_token),
      leaseUntil: toNullableDate(row.lease_until),
      receivedAt: toDate(row.received_at),
      processedAt: toNullableDate(row.processed_at),
      lastError: toNullableText(row.last_error),
    }),
  };
}
