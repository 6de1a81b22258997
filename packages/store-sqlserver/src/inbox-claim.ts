/**
 * The inbox claim of the relay and of pull workers: the statement that moves due rows of some sources
 * pending → processing under a lease (`claimInboxStatement`), and the store's claim that runs it
 * (`claimInboxRows`). As in outbox-sql.ts, an OUTPUT clause sits alone on its line.
 */
import type { InboxClaimOptions, InboxRow, RelayInboxRow } from '@queuebox/core';
import mssql from 'mssql';
import type { SqlExecutor, Statement } from './executor.ts';
import { markInboxDeadStatement } from './inbox-sql.ts';
import {
  BINARY,
  clampDelayMs,
  jsonParam,
  MAX_ROWS_PER_STATEMENT,
  statementRows,
  TAKE,
  TAKE_BEGIN,
  TAKE_END,
  UTC_NOW,
  utcNowPlus,
} from './outbox-sql.ts';
import { INBOX_COLUMNS, qualified, type RawRow, toInboxRow } from './rows.ts';
import { inboxTable } from './schema-name.ts';
import { claimRows } from './settle.ts';

/**
 * `@sources` as a table of NVARCHAR, so that each source seeks its own range of inbox_due. Wider than
 * inbox.source, so a longer name is not cut down to one that exists. OPENJSON's text has the database's default
 * collation, hence the explicit binary COLLATE where it meets inbox.source (two implicit collations would be a
 * conflict, error 468).
 */
export const SOURCES = "OPENJSON(@sources) WITH (source NVARCHAR(400) '$') AS s";

/**
 * `column` is the source `s.source`: equal in the binary collation and of the same length, because T-SQL pads
 * the shorter operand with spaces before comparing (migration 0003).
 */
export function isSource(column: string): string {
  return `${column} = s.source COLLATE ${BINARY} AND DATALENGTH(${column}) = DATALENGTH(s.source)`;
}

/**
 * How many rows each source may read and lock in a statement that reads `sources` sources, each with its own
 * CROSS APPLY … TOP over the inbox: at most `rows`, and at most {@link MAX_ROWS_PER_STATEMENT} / `sources` (at
 * least 1). The U-locks of all sources fall on one reference of the table, and SQL Server tries to escalate to a
 * table lock — which would block every inbox insert — once one statement holds 5,000 locks on one reference: 60
 * sources × a batch of 100 would be 6,000. The outer TOP still answers at most `rows` rows, oldest first among
 * the rows read; a source with more due rows than its share gets the rest on the next claim. Above 4,000
 * sources one row each is still more than 4,000.
 */
export function rowsPerSource(sources: number, rows: number): number {
  const share = Math.floor(MAX_ROWS_PER_STATEMENT / Math.max(1, Math.floor(sources)));
  return Math.max(1, Math.min(statementRows(rows), share));
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
  /** False: the rows are answered without their payload (the relay's claim, see `RELAY_INBOX_COLUMNS`). Default true. */
  readonly payload?: boolean;
}

/** The columns of the relay's claim: `INBOX_COLUMNS` without the payload, which the forward copies in SQL. */
export const RELAY_INBOX_COLUMNS = INBOX_COLUMNS.replace(', payload, ', ', ');

/** Maps a row of the relay's claim (no payload column). */
function toRelayInboxRow(raw: RawRow): RelayInboxRow {
  const { payload: _payload, ...row } = toInboxRow({ ...raw, payload: 'null' });
  return row;
}

/**
 * pending → processing for due rows of the sources, oldest first, with one new token (NEWID()) and a lease;
 * with takeover, an expired processing row of the sources instead (processing → processing, attempt + 1): the
 * one with the oldest lease, alone — a claim that takes over answers that one row, never mixed with others, so a
 * row that crashes its worker is retried by itself and the rows of a crashed batch each on their own (as on
 * PostgreSQL). Each source reads its own range of `inbox_due` (and, for takeover, of `inbox_lease`) with CROSS
 * APPLY and {@link TAKE}, at most {@link rowsPerSource} rows per source, so concurrent pull workers of one source
 * take different rows and the statement's locks stay below lock escalation; rows locked but not chosen are
 * released when the statement ends. With takeover, `due` numbers the candidates in claim order (`n`) and knows
 * whether any is expired (`first_rank` 0), and `chosen` keeps row 1 alone when it is expired, else every
 * candidate. The UPDATE finds each row by primary-key seek and re-checks the whole predicate on the locked row:
 * pending and due, or (takeover only) processing with an expired lease.
 */
export function claimInboxStatement(schema: string, p: InboxClaimParameters): Statement {
  const t = inboxTable(schema);
  const expired = `SELECT e.id, 0 AS rank, e.lease_until AS since
    FROM ${SOURCES}
    CROSS APPLY (
      SELECT TOP (@perSource) i.id, i.lease_until
      FROM ${t} AS i WITH (${TAKE})
      WHERE ${isSource('i.source')} AND i.state = N'processing' AND i.lease_until < ${UTC_NOW}
      ORDER BY i.lease_until, i.id
    ) AS e
    UNION ALL
    `;
  const recheck = p.takeOverExpired
    ? `(i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW}) OR (i.state = N'processing' AND i.lease_until < ${UTC_NOW})`
    : `i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW}`;
  // With takeover the candidates (`due`: rows due for a claim, expired or pending) are numbered in claim order,
  // and `chosen` keeps the first alone when it is expired.
  const [candidates, order, alone] = p.takeOverExpired
    ? [
        'due',
        ', ROW_NUMBER() OVER (ORDER BY c.rank, c.since, c.id) AS n, MIN(c.rank) OVER () AS first_rank',
        '\n),\nchosen AS (\n  SELECT r.id FROM due AS r WHERE r.n = 1 OR r.first_rank = 1',
      ]
    : ['chosen', '', ''];
  return {
    text: `${TAKE_BEGIN}DECLARE @claimToken UNIQUEIDENTIFIER = NEWID();
WITH ${candidates} AS (
  SELECT TOP (@batchSize) c.id${order}
  FROM (
    ${p.takeOverExpired ? expired : ''}SELECT d.id, 1 AS rank, d.scheduled_at AS since
    FROM ${SOURCES}
    CROSS APPLY (
      SELECT TOP (@perSource) i.id, i.scheduled_at
      FROM ${t} AS i WITH (${TAKE})
      WHERE ${isSource('i.source')} AND i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW}
      ORDER BY i.scheduled_at, i.id
    ) AS d
  ) AS c
  ORDER BY c.rank, c.since, c.id${alone}
)
UPDATE i
SET attempt = i.attempt + CASE WHEN i.state = N'processing' THEN 1 ELSE 0 END,
  state = N'processing',
  claim_token = @claimToken,
  lease_until = ${utcNowPlus('@leaseMs')},
  updated_at = SYSUTCDATETIME()
OUTPUT ${qualified(p.payload === false ? RELAY_INBOX_COLUMNS : INBOX_COLUMNS, 'inserted')}
FROM ${t} AS i WITH (FORCESEEK)
INNER JOIN chosen ON chosen.id = i.id
WHERE ${recheck};${TAKE_END}`,
    values: {
      sources: jsonParam(p.sources),
      batchSize: { type: mssql.Int, value: statementRows(p.batchSize) },
      perSource: { type: mssql.Int, value: rowsPerSource(new Set(p.sources).size, p.batchSize) },
      leaseMs: { type: mssql.BigInt, value: clampDelayMs(p.leaseMs) },
    },
  };
}

/**
 * The inbox store's `claim` (and, with `payload: false`, its `claimForRelay`: the rows without their payload): one
 * batch; error 1222 answers that nothing is claimable now, and a claimed row that cannot be read goes dead alone
 * (`unreadable row: …`, see `claimRows`).
 */
export async function claimInboxRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  options: InboxClaimOptions,
): Promise<InboxRow[]>;
export async function claimInboxRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  options: InboxClaimOptions,
  payload: false,
): Promise<RelayInboxRow[]>;
export async function claimInboxRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  { sources, batchSize, leaseMs, takeOverExpired }: InboxClaimOptions,
  payload = true,
): Promise<RelayInboxRow[]> {
  const n = Math.floor(batchSize);
  if (!(n > 0) || sources.length === 0) return [];
  const statement = claimInboxStatement(schema, {
    sources: [...new Set(sources)],
    batchSize: n,
    leaseMs,
    takeOverExpired: takeOverExpired === true,
    payload,
  });
  return claimRows(executor, statement, payload ? toInboxRow : toRelayInboxRow, (unreadable) =>
    markInboxDeadStatement(schema, unreadable),
  );
}
