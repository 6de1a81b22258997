/**
 * Payloads left out of the outbox claim's answer, as store-postgres's large-columns.ts leaves them out over `pg`:
 * `@queuebox/outbox`'s poller asks its claim to answer no payload larger than 64 KiB (`deferPayloadsOverBytes`), and
 * reads each such row (`store.get`) just before its delivery, within a byte budget, so a claim of `batchSize` rows
 * of several MiB each no longer holds all of them at once (on PostgreSQL, 60 rows of 1–10 MiB took 966 MB and then
 * an out-of-memory crash at every restart).
 *
 * SQL Server measures the payload, NVARCHAR(MAX), in UTF-16 code units: `DATALENGTH` ÷ 2, read from the value's
 * length without converting it. That is its size in bytes as UTF-8 JSON text for ASCII text (most JSON, and
 * PostgreSQL's `octet_length(payload::text)` of the same document), and at most three times fewer for other text
 * (a code unit is 1 to 3 bytes of UTF-8; a surrogate pair, 2 units, is 4 bytes). So a payload of more than `bytes`
 * code units is left out (its UTF-8 text is larger than `bytes` too), and one answered holds at most `bytes` code
 * units: 128 KiB on the wire, at most 192 KiB of UTF-8. The size the row carries is that count of code units, which
 * the poller compares with `outbox.maxPayloadBytes`.
 */
import { StoreError } from '@queuebox/core';
import type { RawRow } from './rows.ts';

/**
 * The property a claimed `OutboxRow` whose payload was left out carries: the payload's size (UTF-16 code units,
 * see above). The same registered symbol as store-postgres's and `@queuebox/outbox`'s, which reads it without
 * importing this package; a symbol key, so no JSON or log shows it.
 */
export const DEFERRED_PAYLOAD = Symbol.for('queuebox.outbox.deferredPayloadBytes');

/**
 * The select list `columns` (an `OUTPUT` list qualified with `alias`, `inserted` in the claim) with `payload`
 * answered only when it holds at most `bytes` UTF-16 code units (`DATALENGTH` at most 2 × `bytes`, the parameter
 * `@inlinePayloadBytes` the statement binds, see {@link inlinePayloadBytes}), and a column `payload_bytes`: NULL
 * when it was answered, else its size in code units. `DATALENGTH` of an NVARCHAR(MAX) reads its length, not the
 * value, so an answered row costs two length reads.
 */
export function deferredPayloadColumns(columns: string, alias: string): string {
  const p = `${alias}.payload`;
  const small = `DATALENGTH(${p}) <= @inlinePayloadBytes`;
  return [
    ...columns
      .split(', ')
      .map((c) => (c === 'payload' ? `CASE WHEN ${small} THEN ${p} END AS payload` : `${alias}.${c}`)),
    `CASE WHEN ${small} THEN NULL ELSE DATALENGTH(${p}) / 2 END AS payload_bytes`,
  ].join(', ');
}

/**
 * The value of `@inlinePayloadBytes` for payloads of at most `bytes` UTF-16 code units: the `DATALENGTH` of such a
 * payload, 2 bytes per code unit. Throws `StoreError` unless `bytes` is a positive safe integer.
 */
export function inlinePayloadBytes(bytes: number): number {
  if (!Number.isSafeInteger(bytes) || bytes <= 0 || bytes > Number.MAX_SAFE_INTEGER / 2)
    throw new StoreError('deferred bytes must be positive');
  return 2 * bytes;
}

/**
 * `toRow` for a claim answered with {@link deferredPayloadColumns}: a row with a `payload_bytes` is mapped with a
 * JSON `null` payload (its column is NULL, which the JSON reader refuses: the column is NOT NULL, so only the claim
 * answers it) and marked with its size under {@link DEFERRED_PAYLOAD}; other rows are mapped as they are.
 */
export function readingDeferredPayloads<T extends object>(toRow: (row: RawRow) => T): (row: RawRow) => T {
  return (raw) => {
    const size = raw.payload_bytes;
    if (size === null || size === undefined) return toRow(raw);
    const row = toRow({ ...raw, payload: 'null' });
    // Enumerable, so a copy by spread (core's `withMessageIds`) keeps it; JSON and Object.keys skip symbols.
    (row as Record<symbol, unknown>)[DEFERRED_PAYLOAD] = Number(size);
    return row;
  };
}
