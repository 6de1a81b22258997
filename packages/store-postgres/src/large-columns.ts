/**
 * Rows that would break a result-size limit of the executor (the RDS Data API: at most 64 KB per row and 1 MiB
 * per response) are read in two steps: the statement that claims or reads them answers their large columns
 * (payload, headers, last_error) only when the row fits its share of the limit, and flags the others `outside`;
 * `readOutsideColumns` then reads those columns in chunks, a bounded page per call. A `pg` or PGlite executor has
 * no such limits, and its statement texts are exactly the ones without this (no size expression at all).
 */
import { parseJsonText, type RowId, StoreError, type Table } from '@queuebox/core';
import type { SqlExecutor, Statement } from './executor.ts';
import type { RawRow } from './rows.ts';
import { quoteSchema } from './schema-name.ts';

/** Limits of an executor's answers (`SqlExecutor.resultLimits`). */
export interface ResultLimits {
  /** Most bytes of one row. */
  readonly maxRowBytes: number;
  /** Most bytes of one answer. */
  readonly maxResultBytes: number;
}

/** The columns read outside when a row is too large: they are the only unbounded ones. */
export const LARGE_COLUMNS = ['payload', 'headers', 'last_error'] as const;

/**
 * Which of the large columns a statement answers, and so sizes and reads outside: all of them, or fewer (the relay's
 * claim answers no payload: counting it flagged rows whose payload it then read in chunks only to drop it).
 */
export type LargeColumn = (typeof LARGE_COLUMNS)[number];

/** Text columns counted with the large ones (bounded, but up to 600 characters each). */
const TEXT_COLUMNS: Record<Table, readonly string[]> = {
  outbox: ['topic', 'key', 'destination'],
  inbox: ['source', 'idempotency_key', 'event_type', 'aggregate_id', 'correlation_id'],
};

/** Bytes of a row that are not in its text columns (ids, timestamps, state, token), rounded up. */
const FIXED_ROW_BYTES = 512;

/** Characters per chunk of an outside column: at 4 bytes per character still under 64 KB per row. */
const CHUNK_CHARS = 15_000;

/**
 * Bytes a row of a `rows`-row answer may have so that the answer stays within the limits (three quarters of
 * the response limit shared by the rows, at most the row limit less a margin, and less `reservedBytes` that a row
 * of the answer also carries, e.g. the relay claim's `blocked_by`). Undefined without limits.
 */
export function inlineBytesFor(
  limits: ResultLimits | undefined,
  rows: number,
  reservedBytes = 0,
): number | undefined {
  if (limits === undefined) return undefined;
  const share = Math.floor((limits.maxResultBytes * 3) / 4 / Math.max(1, rows));
  return Math.max(1024, Math.min(share, limits.maxRowBytes - 8 * 1024 - reservedBytes));
}

/**
 * The select list `columns` (a dialect column list, qualified with `alias` when given). With `inlineBytes`, the
 * large columns are NULL in rows whose text is larger than that, and a column `outside` says which rows those
 * are. `inlineBytes` is a number this module computed, never input. `large`: the large columns `columns` holds.
 */
export function sizedColumns(
  columns: string,
  table: Table,
  alias: string | undefined,
  inlineBytes: number | undefined,
  large: readonly LargeColumn[] = LARGE_COLUMNS,
): string {
  const q = (c: string) => (alias ? `${alias}.${c}` : c);
  const list = columns.split(', ');
  if (inlineBytes === undefined) return list.map(q).join(', ');
  if (!Number.isSafeInteger(inlineBytes) || inlineBytes <= 0)
    throw new StoreError('inline bytes must be positive');
  const size = [
    ...large.filter((c) => c !== 'last_error').map((c) => `pg_catalog.octet_length(${q(c)}::text)`),
    ...[...large.filter((c) => c === 'last_error'), ...TEXT_COLUMNS[table]].map(
      (c) => `coalesce(pg_catalog.octet_length(${q(c)}), 0)`,
    ),
  ].join(' + ');
  const fits = `(${size} + ${FIXED_ROW_BYTES} <= ${inlineBytes})`;
  return [
    ...list.map((c) =>
      (large as readonly string[]).includes(c) ? `CASE WHEN ${fits} THEN ${q(c)} END AS ${c}` : q(c),
    ),
    `NOT ${fits} AS outside`,
  ].join(', ');
}

/** One page of the chunks of the `large` columns of rows `ids`: (id, column, part, text), in that order. */
export function outsideColumnsStatement(
  schema: string,
  table: Table,
  ids: readonly RowId[],
  offset: number,
  limit: number,
  large: readonly LargeColumn[] = LARGE_COLUMNS,
): Statement {
  const t = `${quoteSchema(schema)}.${table === 'outbox' ? 'outbox' : 'inbox'}`;
  const docs = large.map((c) => `('${c}', r.${c}${c === 'last_error' ? '' : '::text'})`).join(', ');
  return {
    text: `SELECT c.id::text AS id, c.col, p.part, pg_catalog.substr(c.doc, (p.part - 1) * $2::int + 1, $2::int) AS text
FROM (
  SELECT r.id, v.col, v.doc FROM ${t} r
  CROSS JOIN LATERAL (VALUES ${docs}) AS v(col, doc)
  WHERE r.id = ANY ($1::bigint[])
) c
CROSS JOIN LATERAL pg_catalog.generate_series(1, greatest(1, pg_catalog.ceil(coalesce(pg_catalog.length(c.doc), 0)::float8 / $2::int)::int)) AS p(part)
ORDER BY c.id, c.col, p.part
OFFSET $3::int LIMIT $4::int`,
    values: [ids, CHUNK_CHARS, offset, limit],
  };
}

/**
 * Fills in the `large` columns of the `rows` flagged `outside` (as `pg` would have read them: payload and headers
 * parsed JSON, last_error text), reading chunks in pages that stay within `limits`. Rows not flagged are left as
 * they are. Throws `StoreError` when a flagged row is gone by the time its columns are read.
 */
export async function readOutsideColumns(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  table: Table,
  rows: RawRow[],
  limits: ResultLimits | undefined,
  large: readonly LargeColumn[] = LARGE_COLUMNS,
): Promise<void> {
  const outside = rows.filter((r) => r.outside === true);
  if (outside.length === 0 || limits === undefined) return;
  const pageRows = Math.max(1, Math.floor((limits.maxResultBytes * 3) / 4 / (CHUNK_CHARS * 4 + 256)));
  const texts = new Map<string, (string | null)[]>();
  for (let offset = 0; ; offset += pageRows) {
    const { text, values } = outsideColumnsStatement(
      schema,
      table,
      outside.map((r) => String(r.id)),
      offset,
      pageRows,
      large,
    );
    const page = await executor.query<{ id: string; col: string; part: number; text: string | null }>(
      text,
      values,
    );
    for (const chunk of page.rows) {
      const key = `${chunk.id}\u0000${chunk.col}`;
      const parts = texts.get(key) ?? [];
      parts[Number(chunk.part) - 1] = chunk.text;
      texts.set(key, parts);
    }
    if (page.rows.length < pageRows) break;
  }
  for (const row of outside) {
    for (const column of large) {
      const parts = texts.get(`${String(row.id)}\u0000${column}`);
      if (parts === undefined) {
        throw new StoreError(`The ${table} row ${String(row.id)} was deleted while its ${column} was read`);
      }
      const whole = parts.every((p) => p === null) ? null : parts.join('');
      row[column] = column === 'last_error' || whole === null ? whole : parseJsonText(whole);
    }
  }
}

/**
 * What `@queuebox/outbox`'s poller asks a claim over `pg` / PGlite (no result limits) to leave out
 * (`deferPayloadsOverBytes`): the `payload` of a row whose payload is larger than this is answered NULL, with its
 * size, and the poller reads it just before its delivery (`store.get`), a bounded number of bytes at once. So a
 * claim of `batchSize` rows holds at most this much payload per row, whatever the rows hold (a backlog of 10 MiB
 * rows claimed 200 at a time held 2 GiB).
 */
export const DEFERRED_PAYLOAD_BYTES = 64 * 1024;

/**
 * The property a claimed `OutboxRow` whose payload was left out carries: the payload's size in bytes (its JSON text,
 * as `octet_length(payload::text)`, or the stored size of an uncompressed one). A registered symbol, so
 * `@queuebox/outbox` reads it without importing this package; a symbol key, so no JSON or log shows it.
 */
export const DEFERRED_PAYLOAD = Symbol.for('queuebox.outbox.deferredPayloadBytes');

/**
 * Of `DEFERRED_PAYLOAD_BYTES`, the part a compressed payload's stored size may take and still be answered: a
 * compressed value's size as text is not known without decompressing it, so it is judged by its stored size, and
 * JSON compresses about 3–10 times (`'x'`-repeated text about 100 times: at most about 800 KiB answered per row).
 */
const COMPRESSED_SHARE = 8;

/**
 * The select list `columns` (qualified with `alias`) with `payload` answered only when it is small, and a column
 * `payload_bytes`: NULL when it was answered, else its size as JSON text. Small costs nothing to tell, on every
 * claimed row: an uncompressed value's stored size (`pg_column_size`, read from its header; no detoasting) at most
 * `bytes`, a compressed one's (PostgreSQL compresses values of rows over about 2 KB) at most `bytes` ÷
 * {@link COMPRESSED_SHARE}. Only a row left out is measured as text (`octet_length(payload::text)`, which
 * decompresses it): a `CASE` evaluates that branch for those rows alone, so a payload of a few KB pays two header
 * reads, not a second conversion to text.
 */
export function deferredPayloadColumns(columns: string, alias: string, bytes: number): string {
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new StoreError('deferred bytes must be positive');
  const p = `${alias}.payload`;
  const compressedBytes = Math.max(1, Math.floor(bytes / COMPRESSED_SHARE));
  const small = `pg_catalog.pg_column_size(${p}) <= CASE WHEN pg_catalog.pg_column_compression(${p}) IS NULL THEN ${bytes} ELSE ${compressedBytes} END`;
  return [
    ...columns
      .split(', ')
      .map((c) => (c === 'payload' ? `CASE WHEN ${small} THEN ${p} END AS payload` : `${alias}.${c}`)),
    `CASE WHEN ${small} THEN NULL ELSE pg_catalog.octet_length(${p}::text) END AS payload_bytes`,
  ].join(', ');
}

/** Marks the claimed `rows` whose raw row carried a `payload_bytes` (matched by id) as deferred. */
export function markDeferredPayloads<T extends { readonly id: unknown }>(
  raw: readonly RawRow[],
  rows: readonly T[],
): void {
  let sizes: Map<string, number> | undefined;
  for (const r of raw) {
    if (r.payload_bytes === null || r.payload_bytes === undefined) continue;
    sizes ??= new Map();
    sizes.set(String(r.id), Number(r.payload_bytes));
  }
  if (sizes === undefined) return;
  for (const row of rows) {
    const bytes = sizes.get(String(row.id));
    if (bytes !== undefined) {
      // Enumerable, so a copy by spread (core's `withMessageIds`) keeps it; JSON and Object.keys skip symbols.
      (row as Record<symbol, unknown>)[DEFERRED_PAYLOAD] = bytes;
    }
  }
}
