import {
  type Headers,
  type InboxRow,
  type MessageState,
  type OutboxRow,
  type RowId,
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
      // A uuid like the claim token (lower case, with dashes), or null for a row written before migration 0009.
      messageUid: toClaimToken(row.message_uid),
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

/**
 * A value the session answered in a form the store cannot read whatever the row holds (a NOT NULL timestamp that
 * reads as nothing: a `DateStyle` other than ISO): the session's fault, not the row's. {@link readClaimedRows} throws
 * it rather than dead-letter the row, which would dead-letter every row the session reads.
 */
export class SessionValueError extends StoreError {}

/** A claimed row that could not be mapped: its claim (to settle it) and why it could not be read. */
export interface UnreadableClaim {
  readonly id: RowId;
  readonly claimToken: string;
  /** `unreadable row: <what the reader said>`, kept in last_error when the row goes dead. */
  readonly reason: string;
}

/** What {@link readClaimedRows} answers. */
export interface ClaimedRows<T> {
  /** The rows that mapped, in the order given. */
  readonly rows: T[];
  /** The rows that did not, with their claims: the store dead-letters them so they do not come back. */
  readonly unreadable: UnreadableClaim[];
}

/**
 * Maps the rows a claim answered one by one, so that a row the reader cannot map (a payload that is not JSON, a
 * timestamp out of range, written by plain SQL) is set aside alone instead of failing the whole claim — whose
 * UPDATE has committed, so throwing would strand every row of the batch until its lease expires and burn an
 * attempt each time. A row whose id or claim token cannot be read cannot be settled either; its error is thrown, and
 * so is a {@link SessionValueError} (not the row's fault: every row would go dead).
 */
export function readClaimedRows<T>(
  rows: readonly RawRow[],
  toRow: (row: RawRow) => T,
  readers: Pick<ColumnReaders, 'toRowId' | 'toClaimToken'>,
): ClaimedRows<T> {
  const mapped: T[] = [];
  const unreadable: UnreadableClaim[] = [];
  for (const row of rows) {
    try {
      mapped.push(toRow(row));
    } catch (error) {
      if (error instanceof SessionValueError) throw error;
      const id = readers.toRowId(row.id);
      const claimToken = readers.toClaimToken(row.claim_token);
      if (claimToken === null) throw error;
      const detail = error instanceof Error ? error.message : String(error);
      unreadable.push({ id, claimToken, reason: `unreadable row: ${detail}` });
    }
  }
  return { rows: mapped, unreadable };
}
