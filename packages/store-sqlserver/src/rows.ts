import { type JsonValue, parseJsonText, StoreError } from '@queuebox/core';
import { type ColumnReaders, createRowMappers } from '@queuebox/sql-store-common';

export { compareIds, inboxState, outboxState, qualified, type RawRow } from '@queuebox/sql-store-common';

// How mssql (tedious) hands columns over: BIGINT as a decimal string (tedious never narrows it to a number),
// INT as a number, DATETIME2 as a Date read as UTC (tedious' `useUTC` default), UNIQUEIDENTIFIER as an
// upper-case string, NVARCHAR(MAX) JSON as text, NULL as null.

/** The outbox columns every statement that reads rows selects, in table order (`[key]` is a reserved word). */
export const OUTBOX_COLUMNS =
  'id, topic, [key], payload, headers, state, attempt, max_attempts, scheduled_at, claim_token, lease_until, created_at, updated_at, sent_at, last_error, destination, message_uid';

/** The inbox columns every statement that reads rows selects, in table order. */
export const INBOX_COLUMNS =
  'id, source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, attempt, max_attempts, scheduled_at, claim_token, lease_until, received_at, updated_at, processed_at, last_error';

/** Ids travel as decimal strings; tedious gives BIGINT as a string already, a number or bigint is converted. */
export function toRowId(value: unknown): string {
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isSafeInteger(value)) return value.toString();
  throw new StoreError(
    `Expected a row id, got ${typeof value === 'string' ? JSON.stringify(value) : typeof value}`,
  );
}

function toText(value: unknown): string {
  if (typeof value === 'string') return value;
  throw new StoreError(`Expected text, got ${typeof value}`);
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

/** Claim tokens in lower case, as PostgreSQL's uuid text has them; SQL Server answers upper case. */
export function toClaimToken(value: unknown): string | null {
  return value === null || value === undefined ? null : toText(value).toLowerCase();
}

/** NVARCHAR(MAX) JSON arrives as text and is parsed here. */
function toJson(value: unknown, column: string): JsonValue {
  try {
    return parseJsonText(toText(value));
  } catch (error) {
    if (error instanceof StoreError) throw error;
    throw new StoreError(`The ${column} column does not hold JSON`, { cause: error });
  }
}

/** How mssql hands the columns over that drivers differ in (see the note at the top). */
export const SQL_SERVER_READERS: ColumnReaders = {
  toRowId,
  toJson,
  toDate: toUtcDate,
  toClaimToken,
};

/** Maps a row selected with `OUTBOX_COLUMNS` / `INBOX_COLUMNS` (see sql-store-common's `createRowMappers`). */
export const { toOutboxRow, toInboxRow } = createRowMappers(SQL_SERVER_READERS);
