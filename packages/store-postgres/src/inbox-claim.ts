/**
 * The inbox claim of the relay and of pull workers: the statement that moves due rows of some sources
 * pending → processing under a lease (`claimInboxStatement`), and the store's claim that runs it
 * (`claimInboxRows`).
 */
import type { InboxClaimOptions, InboxRow, RelayInboxRow } from '@queuebox/core';
import { readClaimedRows } from '@queuebox/sql-store-common';
import type { SqlExecutor, Statement } from './executor.ts';
import { markInboxDeadStatement } from './inbox-sql.ts';
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
  /** Also take over processing rows of these sources whose lease expired (counting an attempt). */
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
 * takeover, expired processing rows of the sources first (processing → processing, attempt + 1). Each source is
 * read from its own range of `inbox_due`, with `FOR UPDATE SKIP LOCKED`, so concurrent pull workers of one
 * source take different rows; rows locked but not chosen are released at the end of the statement.
 */
export function claimInboxStatement(schema: string, p: InboxClaimParameters): Statement {
  const t = inboxTable(schema);
  return {
    text: `WITH expired AS (
  SELECT i.id, 0 AS rank, i.lease_until AS since FROM ${t} i
  WHERE $4::boolean AND i.state = 'processing' AND i.lease_until < now() AND i.source = ANY($1::text[])
  ORDER BY i.lease_until
  LIMIT $2::int
  FOR UPDATE SKIP LOCKED
),
due AS (
  SELECT d.id, 1 AS rank, d.scheduled_at AS since
  FROM unnest($1::text[]) AS s(source)
  CROSS JOIN LATERAL (
    SELECT i.id, i.scheduled_at FROM ${t} i
    WHERE i.source = s.source AND i.state = 'pending' AND i.scheduled_at <= now()
    ORDER BY i.scheduled_at, i.id
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED
  ) d
),
chosen AS (
  SELECT c.id FROM (SELECT * FROM expired UNION ALL SELECT * FROM due) c
  ORDER BY c.rank, c.since, c.id
  LIMIT $2::int
),
token AS (SELECT gen_random_uuid() AS value),
claimed AS (
  UPDATE ${t} i
  SET attempt = i.attempt + CASE WHEN i.state = 'processing' THEN 1 ELSE 0 END,
      state = 'processing',
      claim_token = (SELECT value FROM token),
      lease_until = now() + $3::float8 * interval '1 millisecond',
      updated_at = now()
  WHERE i.id = ANY (ARRAY(SELECT id FROM chosen))
  RETURNING ${sizedColumns(p.payload === false ? RELAY_INBOX_COLUMNS : INBOX_COLUMNS, 'inbox', 'i', p.inlineBytes)}
)
SELECT * FROM claimed ORDER BY id::bigint`,
    values: [p.sources, p.batchSize, p.leaseMs, p.takeOverExpired],
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
  { sources, batchSize, leaseMs, takeOverExpired }: InboxClaimOptions,
  payload = true,
): Promise<RelayInboxRow[]> {
  const n = Math.floor(batchSize);
  if (!(n > 0) || sources.length === 0) return [];
  const limits = executor.resultLimits;
  const { text, values } = claimInboxStatement(schema, {
    sources: [...new Set(sources)],
    batchSize: n,
    leaseMs,
    takeOverExpired: takeOverExpired === true,
    payload,
    ...(limits === undefined ? {} : { inlineBytes: inlineBytesFor(limits, n) }),
  });
  const answered = (await executor.query<RawRow>(text, values)).rows;
  await readOutsideColumns(executor, schema, 'inbox', answered, limits);
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
