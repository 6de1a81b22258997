/**
 * The inbox claim of the relay and of pull workers: the statement that moves due rows of some sources
 * pending → processing under a lease (`claimInboxStatement`), and the store's claim that runs it
 * (`claimInboxRows`).
 */
import type { ForwardItem, InboxClaimOptions, InboxRow, RelayInboxRow } from '@queuebox/core';
import { readClaimedRows } from '@queuebox/sql-store-common';
import type { SqlExecutor, Statement } from './executor.ts';
import { forwardInboxCtes, forwardInboxValues, markInboxDeadStatement } from './inbox-sql.ts';
import { inlineBytesFor, readOutsideColumns, sizedColumns } from './large-columns.ts';
import { INBOX_COLUMNS, POSTGRES_READERS, type RawRow, toInboxRow } from './rows.ts';
import { inboxTable } from './schema-name.ts';

/** Maps a row of the relay's claim (no payload column; one read outside is dropped too). */
function toRelayInboxRow(raw: RawRow): RelayInboxRow {
  const { payload: _payload, ...row } = toInboxRow({ ...raw, payload: null });
  return row;
}

/** Parameters of `claimInboxStatement`. */
export interface InboxClaimParameters {
  readonly sources: readonly string[];
  readonly batchSize: number;
  readonly leaseMs: number;
  /**
   * Also take over a processing row of these sources whose lease expired (counting an attempt): one per claim,
   * claimed alone (see `claimInboxStatement`).
   */
  readonly takeOverExpired: boolean;
  /** Rows larger than this answer their large columns outside (`sizedColumns`). Default: all inline. */
  readonly inlineBytes?: number;
  /** False: the rows are answered without their payload (the relay's claim, see `RELAY_INBOX_COLUMNS`). Default true. */
  readonly payload?: boolean;
}

/** The columns of the relay's claim: `INBOX_COLUMNS` without the payload, which the forward copies in SQL. */
export const RELAY_INBOX_COLUMNS = INBOX_COLUMNS.replace(', payload, ', ', ');

/**
 * pending → processing for due rows of the sources, oldest first, with one new token and a lease; with
 * takeover, an expired processing row of the sources instead (processing → processing, attempt + 1): the one
 * with the oldest lease, alone — a claim that takes over answers that one row, never mixed with others, so a row
 * that crashes its worker is retried by itself and the rows of a crashed batch each on their own. Each source is
 * read from its own range of `inbox_due`, with `FOR UPDATE SKIP LOCKED`, so concurrent pull workers of one
 * source take different rows; rows locked but not chosen are released at the end of the statement.
 */
export function claimInboxStatement(schema: string, p: InboxClaimParameters): Statement {
  return {
    text: `WITH ${claimInboxCtes(schema, p, 1)}
SELECT * FROM claimed ORDER BY id::bigint`,
    values: claimInboxValues(p),
  };
}

/**
 * The CTEs of `claimInboxStatement` (`expired`, `due`, `chosen`, `token`, `claimed`: the claimed rows), reading
 * `claimInboxValues` as the parameters `$at` … `$at+3`, so another statement can claim too (the relay's
 * forward-and-claim, inbox-sql.ts). `expired` holds at most one row (takeover only); when it holds one, `due`
 * reads and locks nothing (a one-time filter), so that row is claimed alone.
 */
export function claimInboxCtes(schema: string, p: InboxClaimParameters, at: number): string {
  const t = inboxTable(schema);
  const [sources, batchSize, leaseMs, takeOver] = [at, at + 1, at + 2, at + 3].map((n) => `$${n}`);
  return `expired AS (
  SELECT i.id, 0 AS rank, i.lease_until AS since FROM ${t} i
  WHERE ${takeOver}::boolean AND i.state = 'processing' AND i.lease_until < now() AND i.source = ANY(${sources}::text[])
  ORDER BY i.lease_until, i.id
  LIMIT 1
  FOR UPDATE SKIP LOCKED
),
due AS (
  SELECT d.id, 1 AS rank, d.scheduled_at AS since
  FROM unnest(${sources}::text[]) AS s(source)
  CROSS JOIN LATERAL (
    SELECT i.id, i.scheduled_at FROM ${t} i
    WHERE i.source = s.source AND i.state = 'pending' AND i.scheduled_at <= now()
      AND NOT EXISTS (SELECT 1 FROM expired)
    ORDER BY i.scheduled_at, i.id
    LIMIT ${batchSize}::int
    FOR UPDATE SKIP LOCKED
  ) d
),
chosen AS (
  SELECT c.id FROM (SELECT * FROM expired UNION ALL SELECT * FROM due) c
  ORDER BY c.rank, c.since, c.id
  LIMIT ${batchSize}::int
),
token AS (SELECT gen_random_uuid() AS value),
claimed AS (
  UPDATE ${t} i
  SET attempt = i.attempt + CASE WHEN i.state = 'processing' THEN 1 ELSE 0 END,
      state = 'processing',
      claim_token = (SELECT value FROM token),
      lease_until = now() + ${leaseMs}::float8 * interval '1 millisecond',
      updated_at = now()
  WHERE i.id = ANY (ARRAY(SELECT id FROM chosen))
  RETURNING ${sizedColumns(p.payload === false ? RELAY_INBOX_COLUMNS : INBOX_COLUMNS, 'inbox', 'i', p.inlineBytes)}
)`;
}

/** The parameters of `claimInboxCtes`, in order. */
export function claimInboxValues(p: InboxClaimParameters): unknown[] {
  return [p.sources, p.batchSize, p.leaseMs, p.takeOverExpired];
}

/**
 * The parameters of a claim of `options` on `executor` (sources deduplicated, the batch size whole, the inline
 * size of the executor's result limits), or undefined when it can claim nothing.
 */
export function inboxClaimParameters(
  executor: Pick<SqlExecutor, 'resultLimits'>,
  { sources, batchSize, leaseMs, takeOverExpired }: InboxClaimOptions,
  payload: boolean,
): InboxClaimParameters | undefined {
  const n = Math.floor(batchSize);
  if (!(n > 0) || sources.length === 0) return undefined;
  const limits = executor.resultLimits;
  return {
    sources: [...new Set(sources)],
    batchSize: n,
    leaseMs,
    takeOverExpired: takeOverExpired === true,
    payload,
    ...(limits === undefined ? {} : { inlineBytes: inlineBytesFor(limits, n) }),
  };
}

/**
 * Reads the rows a claim answered: their large columns read outside when flagged, each mapped alone, and the
 * rows that cannot be read sent dead (best effort, or their lease expires as after a crash).
 */
export async function readClaimedInboxRows(
  executor: SqlExecutor,
  schema: string,
  answered: RawRow[],
  payload: boolean,
): Promise<RelayInboxRow[]> {
  await readOutsideColumns(executor, schema, 'inbox', answered, executor.resultLimits);
  const { rows, unreadable } = readClaimedRows(
    answered,
    payload ? toInboxRow : toRelayInboxRow,
    POSTGRES_READERS,
  );
  if (unreadable.length > 0) {
    const dead = markInboxDeadStatement(schema, unreadable);
    await executor.query(dead.text, dead.values).catch(() => undefined);
  }
  return rows;
}

/**
 * The relay's step as one statement: the forward of `items` (`forwardInboxStatement`: processing → processed and
 * the outbox rows, payloads copied from the inbox rows) and the claim of the next batch (`claimInboxStatement`,
 * usually without payloads) — one round trip and one commit where the relay used two. The two touch different rows:
 * the forward only rows in state processing under its items' tokens, the claim only pending ones. The answer has
 * one row per claimed row, in id order (a single row of NULL columns when none was claimed); the first row carries
 * the forward's `forwarded` and `outbox_ids` arrays, the others NULL. When an item's outbox row has a key, run
 * `lockOutboxKeysStatement` first in the same transaction (the store does).
 */
export function forwardAndClaimInboxStatement(
  schema: string,
  items: readonly ForwardItem[],
  claim: InboxClaimParameters,
): Statement {
  return {
    text: `WITH ${forwardInboxCtes(schema)},
${claimInboxCtes(schema, claim, 9)},
report AS (
  SELECT (SELECT coalesce(array_agg(id::text), '{}') FROM forwarded) AS forwarded,
         (SELECT coalesce(array_agg(id::text ORDER BY id), '{}') FROM inserted) AS outbox_ids
)
SELECT CASE WHEN c.claim_order IS NULL OR c.claim_order = 1 THEN r.forwarded END AS forwarded,
       CASE WHEN c.claim_order IS NULL OR c.claim_order = 1 THEN r.outbox_ids END AS outbox_ids,
       c.*
FROM report r
LEFT JOIN (SELECT claimed.*, row_number() OVER (ORDER BY claimed.id::bigint) AS claim_order FROM claimed) c ON true
ORDER BY c.claim_order`,
    values: [...forwardInboxValues(items), ...claimInboxValues(claim)],
  };
}

/**
 * The inbox store's `claim` (and, with `payload: false`, its `claimForRelay`: the rows without their payload): one
 * statement; a claimed row that cannot be read goes dead alone (best effort, or its lease expires as after a crash).
 */
export async function claimInboxRows(
  executor: SqlExecutor,
  schema: string,
  options: InboxClaimOptions,
): Promise<InboxRow[]>;
export async function claimInboxRows(
  executor: SqlExecutor,
  schema: string,
  options: InboxClaimOptions,
  payload: false,
): Promise<RelayInboxRow[]>;
export async function claimInboxRows(
  executor: SqlExecutor,
  schema: string,
  options: InboxClaimOptions,
  payload = true,
): Promise<RelayInboxRow[]> {
  const parameters = inboxClaimParameters(executor, options, payload);
  if (parameters === undefined) return [];
  const { text, values } = claimInboxStatement(schema, parameters);
  const answered = (await executor.query<RawRow>(text, values)).rows;
  return readClaimedInboxRows(executor, schema, answered, payload);
}
