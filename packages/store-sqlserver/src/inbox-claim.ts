/**
 * The inbox claim of the relay and of pull workers: the statement that moves due rows of some sources
 * pending → processing under a lease (`claimInboxStatement`), and the store's claim that runs it
 * (`claimInboxRows`). As in outbox-sql.ts, an OUTPUT clause sits alone on its line.
 */
import {
  type InboxClaimOptions,
  type InboxRow,
  MAX_SKIP_SCAN_ROWS,
  MAX_SKIPPED_AGGREGATES,
  type RelayClaimedRows,
  type RelayClaimOptions,
  type RelayInboxRow,
} from '@queuebox/core';
import { isRowId, readClaimedRows } from '@queuebox/sql-store-common';
import mssql from 'mssql';
import { isLockTimeout } from './errors.ts';
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
import {
  compareIds,
  INBOX_COLUMNS,
  qualified,
  type RawRow,
  SQL_SERVER_READERS,
  toInboxRow,
  toRowId,
} from './rows.ts';
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
  /**
   * False: the relay's claim — the rows are answered without their payload (see `RELAY_INBOX_COLUMNS`), in the order
   * of each aggregate id (`claimRelayInboxStatement`), never with takeover. Default true: pull workers' claims, any
   * due rows (several of one aggregate id together, whatever is active before them).
   */
  readonly payload?: boolean;
  /**
   * The relay's claim only: rows whose (source, aggregate id) its window skips (`RelayClaimOptions`), valid row ids,
   * distinct, at most MAX_SKIPPED_AGGREGATES. Empty or absent: the plain claim, whose text has no trace of it.
   */
  readonly skipAggregatesOf?: readonly string[];
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
  if (p.payload === false) return claimRelayInboxStatement(schema, p);
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
OUTPUT ${qualified(INBOX_COLUMNS, 'inserted')}
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
 * Exact equality of the source and aggregate id of inbox rows `a` and `b` (see `claimRelayInboxStatement`; also the
 * admin requeue's): the collation-equal comparison lets a seek use `inbox_active_aggregate`, the binary one decides.
 */
export function sameAggregate(a: string, b: string): string {
  return `${a}.source = ${b}.source AND DATALENGTH(${a}.source) = DATALENGTH(${b}.source)
    AND ${a}.aggregate_id = ${b}.aggregate_id
    AND ${a}.aggregate_id = ${b}.aggregate_id COLLATE ${BINARY} AND DATALENGTH(${a}.aggregate_id) = DATALENGTH(${b}.aggregate_id)`;
}

/**
 * The relay's claim (docs/design.md §5 Ordering; as store-postgres's `relayClaimCtes`, which says why): the rows of
 * one source and aggregate id are claimed in id order, a row with an aggregate id only together with, or after,
 * every earlier row of its id that is pending or processing. One batch in one explicit transaction:
 *
 * 1. `@window`: per source, the first {@link rowsPerSource} due pending rows in (scheduled_at, id) order, read with
 *    {@link TAKE} (U locks, skipping rows others hold) — the scan's TOP is the bound, whatever waits behind it. Each
 *    keyed row gets its chain (the largest window id of its source and aggregate id) and the chain's first id. A
 *    claim that skips aggregate ids (`skipAggregatesOf`) reads its window without their rows instead
 *    (`skippedSteps`).
 * 2. `@earlier`: per chain, one seek of `inbox_active_aggregate` (migration 0006) for the oldest row of the id below
 *    the chain's last row that is pending or processing and not in the window (only its id, which the filtered
 *    index covers, so the seek costs no lookups and a scan of the clustered index in id order never looks cheaper;
 *    its state and due time are read by primary key after). It is read without READPAST, so a row another session
 *    has U-locked still counts (under READ_COMMITTED_SNAPSHOT as last committed, else with a shared lock that waits
 *    at most TAKE_LOCK_TIMEOUT_MS for a row being written). Window rows above it are blocked.
 * 3. `@candidates`: the unblocked window rows, and the heads: an earlier row older than every window row of its
 *    chain (the oldest active row of the id, e.g. a requeued one) that is pending and due, locked with {@link TAKE}
 *    (a head another session holds is skipped: the id waits).
 * 4. `@blocked`: window rows left blocked, except those whose earlier row is pending and not due yet; `@blockedBy`:
 *    the earlier rows holding them back, one per chain, and the skipped ids' processing rows (`@held`), at most
 *    MAX_SKIPPED_AGGREGATES, as JSON (FOR JSON PATH, each id a string).
 * 5. The UPDATE takes at most `@batchSize` candidates, oldest first, a keyed row by the earliest scheduled_at of
 *    itself and the later candidates of its chain, so no later row of an id goes without its earlier candidates.
 * 6. The answer: the claimed rows (the candidates now holding the new token), each with `blocked` and the first
 *    with `blocked_by`; one row of NULLs with both when none.
 *
 * Why table variables in a transaction: T-SQL inlines a CTE at every reference, so a READPAST/UPDLOCK window that
 * the blocked check, the heads and the chosen rows all read could be evaluated more than once, seeing different
 * rows each time; and an UPDATE … OUTPUT cannot also answer how many rows were left blocked when it claims nothing.
 * (A single statement could count, per window row, its earlier active rows with a bounded TOP against its
 * ROW_NUMBER() in its chain, but that reads a chain's window rows once per row — quadratic in a busy id's share of
 * the batch — and still could not report.) The window is read once into `@window`; UPDLOCK keeps its U locks, and
 * the heads', until COMMIT, so the rows cannot change before the UPDATE. SET XACT_ABORT ON rolls the whole
 * transaction back on any error, a lock timeout (1222) or a client's cancel included, so no transaction outlives the
 * batch. Nor do its SET options: the executor runs every statement through mssql's `query`, which tedious sends as
 * `sp_executesql`, and SQL Server restores a SET option set in a dynamic SQL batch run by `sp_executesql` once control
 * returns from it (the SET statements' documentation), so a pooled connection keeps neither XACT_ABORT nor the
 * LOCK_TIMEOUT after an error ends the batch early; the closing SETs only matter to a caller that runs the text as a
 * plain batch. Rows locked but not claimed are released at the COMMIT. aggregate_id has the database's default collation,
 * so the seek compares with a plain = in that collation (both sides are inbox columns), then exactly: binary
 * collation and equal byte lengths; sources likewise. Reading aggregate_id costs each window row a clustered-index
 * lookup (inbox_due does not hold it); rows without one take no further step.
 */
function claimRelayInboxStatement(schema: string, p: InboxClaimParameters): Statement {
  if (p.takeOverExpired) throw new Error("The relay's claim never takes over expired claims");
  const t = inboxTable(schema);
  const chain = `PARTITION BY d.source, DATALENGTH(d.source), d.aggregate_id COLLATE ${BINARY}, DATALENGTH(d.aggregate_id)`;
  const skip = p.skipAggregatesOf ?? [];
  const skipping = skip.length > 0 ? skippedSteps(t) : undefined;
  const window =
    skipping?.window(chain) ??
    `INSERT INTO @window (id, scheduled_at, chain, first_id)
SELECT d.id, d.scheduled_at,
  CASE WHEN d.aggregate_id IS NULL THEN NULL ELSE MAX(d.id) OVER (${chain}) END,
  CASE WHEN d.aggregate_id IS NULL THEN NULL ELSE MIN(d.id) OVER (${chain}) END
FROM ${SOURCES}
CROSS APPLY (
  SELECT TOP (@perSource) i.id, i.source, i.aggregate_id, i.scheduled_at
  FROM ${t} AS i WITH (${TAKE})
  WHERE ${isSource('i.source')} AND i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW}
  ORDER BY i.scheduled_at, i.id
) AS d;`;
  return {
    text: `${TAKE_BEGIN}SET XACT_ABORT ON;
DECLARE @claimToken UNIQUEIDENTIFIER = NEWID();
DECLARE @blocked INT = 0;
DECLARE @blockedBy NVARCHAR(MAX);
DECLARE @window TABLE (id BIGINT NOT NULL PRIMARY KEY, scheduled_at DATETIME2(3) NOT NULL, chain BIGINT NULL, first_id BIGINT NULL);
DECLARE @earlier TABLE (chain BIGINT NOT NULL PRIMARY KEY, first_id BIGINT NOT NULL, id BIGINT NOT NULL, state NVARCHAR(50) NOT NULL, scheduled_at DATETIME2(3) NOT NULL);
DECLARE @candidates TABLE (id BIGINT NOT NULL PRIMARY KEY, chain BIGINT NOT NULL, scheduled_at DATETIME2(3) NOT NULL);
${skipping?.declare ?? ''}BEGIN TRANSACTION;
${window}
INSERT INTO @earlier (chain, first_id, id, state, scheduled_at)
SELECT w.chain, w.first_id, e.id, a.state, a.scheduled_at
FROM @window AS w
INNER JOIN ${t} AS l WITH (FORCESEEK) ON l.id = w.id
CROSS APPLY (
  SELECT TOP (1) e.id
  FROM ${t} AS e
  WHERE ${sameAggregate('e', 'l')}
    AND e.id < l.id AND e.state IN (N'pending', N'processing') AND e.aggregate_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM @window AS o WHERE o.id = e.id)
  ORDER BY e.id
) AS e
INNER JOIN ${t} AS a WITH (FORCESEEK) ON a.id = e.id
WHERE w.id = w.chain;
INSERT INTO @candidates (id, chain, scheduled_at)
SELECT w.id, COALESCE(w.chain, w.id), w.scheduled_at
FROM @window AS w
LEFT JOIN @earlier AS b ON b.chain = w.chain
WHERE w.chain IS NULL OR b.id IS NULL OR w.id < b.id
UNION ALL
SELECT h.id, b.chain, h.scheduled_at
FROM @earlier AS b
INNER JOIN ${t} AS h WITH (${TAKE}, FORCESEEK) ON h.id = b.id
WHERE b.id < b.first_id AND h.state = N'pending' AND h.scheduled_at <= ${UTC_NOW};
SELECT @blocked = COUNT(*)
FROM @window AS w
INNER JOIN @earlier AS b ON b.chain = w.chain
WHERE b.id < w.id AND (b.state = N'processing' OR b.scheduled_at <= ${UTC_NOW});
${skipping?.held ?? ''}SELECT @blockedBy = (
  SELECT TOP (${MAX_SKIPPED_AGGREGATES}) CAST(b.id AS NVARCHAR(20)) AS id
  FROM (
    SELECT DISTINCT b.id, 1 AS window_row
    FROM @window AS w
    INNER JOIN @earlier AS b ON b.chain = w.chain
    WHERE b.id < w.id AND (b.state = N'processing' OR b.scheduled_at <= ${UTC_NOW})${
      skipping === undefined ? '' : '\n    UNION ALL\n    SELECT h.id, 0 FROM @held AS h'
    }
  ) AS b
  ORDER BY b.window_row, b.id
  FOR JSON PATH
);
WITH chosen AS (
  SELECT TOP (@batchSize) c.id
  FROM (
    SELECT c.id, MIN(c.scheduled_at) OVER (PARTITION BY c.chain ORDER BY c.id DESC ROWS UNBOUNDED PRECEDING) AS since
    FROM @candidates AS c
  ) AS c
  ORDER BY c.since, c.id
)
UPDATE i
SET state = N'processing',
  claim_token = @claimToken,
  lease_until = ${utcNowPlus('@leaseMs')},
  updated_at = SYSUTCDATETIME()
FROM ${t} AS i WITH (FORCESEEK)
INNER JOIN chosen ON chosen.id = i.id
WHERE i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW};
SELECT @blocked AS blocked, CASE WHEN r.claim_order IS NULL OR r.claim_order = 1 THEN @blockedBy END AS blocked_by, r.*
FROM (SELECT 1 AS one) AS answer
LEFT JOIN (
  SELECT ${qualified(RELAY_INBOX_COLUMNS, 'i')}, ROW_NUMBER() OVER (ORDER BY i.id) AS claim_order
  FROM @candidates AS c
  INNER JOIN ${t} AS i WITH (FORCESEEK) ON i.id = c.id
  WHERE i.claim_token = @claimToken
) AS r ON 1 = 1;
COMMIT TRANSACTION;
SET XACT_ABORT OFF;${TAKE_END}`,
    values: {
      sources: jsonParam(p.sources),
      batchSize: { type: mssql.Int, value: statementRows(p.batchSize) },
      perSource: { type: mssql.Int, value: rowsPerSource(new Set(p.sources).size, p.batchSize) },
      leaseMs: { type: mssql.BigInt, value: clampDelayMs(p.leaseMs) },
      ...(skipping === undefined
        ? {}
        : {
            skip: jsonParam(skip),
            skipScan: { type: mssql.Int, value: MAX_SKIP_SCAN_ROWS },
          }),
    },
  };
}

/**
 * The steps of the relay's claim that skip aggregate ids (`RelayClaimOptions.skipAggregatesOf`, the parameter
 * `@skip`: a JSON array of row ids), only in the text of a claim that skips some (as store-postgres's
 * `skippedCtes`, which says why):
 *
 * - `@skipped`: per row of `@skip` that has an aggregate id, its id, source and aggregate id (read by primary key),
 *   the two copied into binary-collation columns, so that the window compares them exactly (binary collation and
 *   equal byte lengths, as `sameAggregate` finishes; T-SQL pads the shorter operand with spaces) without meeting the
 *   aggregate id's default collation (two implicit collations would be a conflict, error 468). Its UNIQUE
 *   (source, aggregate_id, id) constraint is a nonclustered index that makes the window's test of each row it reads
 *   one seek: with up to MAX_SKIPPED_AGGREGATES (1000) ids and MAX_SKIP_SCAN_ROWS (100,000) rows read, a table
 *   variable (estimated at one row) could otherwise be scanned whole for each row, 10^8 comparisons. Its key is at
 *   most 1,308 bytes, within the 1,700 of a nonclustered index (SQL Server 2016+), as `inbox_active_aggregate`'s.
 * - `window`: the window without the rows of those ids, in two steps. `@unlocked`: per source, the due rows in
 *   (scheduled_at, id) order, read at most `@skipScan` (MAX_SKIP_SCAN_ROWS) with READPAST and no lock kept (READ
 *   COMMITTED releases each shared lock once the row is read), the first {@link rowsPerSource} of them that are not
 *   of a skipped id. `INDEX(inbox_due)`: with a TOP this large, a scan of the clustered index and a sort could look
 *   cheaper than the lookups, and would read the whole table. Then `@window`: those rows locked by primary key with {@link TAKE}, pending and due again. The
 *   rows of skipped ids are read but never locked: had one scan with UPDLOCK filtered them, it would keep a U lock
 *   on every row it read and passed over, and the table lock that escalation takes past 5,000 locks would block
 *   every inbox insert. A row another claimer takes between the two steps is passed over (READPAST), so the window
 *   can hold fewer rows than its share.
 * - `held`: per skipped id, one seek of `inbox_active_aggregate` (as `@earlier`, comparing inbox rows with inbox rows:
 *   `sameAggregate`) for its oldest active row; when that row is processing, the id is still held back and the row
 *   goes into `@held` and then `blocked_by`. (The forward of SQL Server's forward-and-claim committed before, so no
 *   row of this batch is being forwarded.)
 */
function skippedSteps(t: string): {
  declare: string;
  window: (chain: string) => string;
  held: string;
} {
  return {
    declare: `DECLARE @skipped TABLE (id BIGINT NOT NULL PRIMARY KEY, source NVARCHAR(200) COLLATE ${BINARY} NOT NULL, aggregate_id NVARCHAR(450) COLLATE ${BINARY} NOT NULL, UNIQUE (source, aggregate_id, id));
DECLARE @unlocked TABLE (id BIGINT NOT NULL PRIMARY KEY);
DECLARE @held TABLE (id BIGINT NOT NULL PRIMARY KEY);
`,
    window: (chain) => `INSERT INTO @skipped (id, source, aggregate_id)
SELECT r.id, r.source, r.aggregate_id
FROM OPENJSON(@skip) WITH (id BIGINT '$') AS k
INNER JOIN ${t} AS r WITH (FORCESEEK) ON r.id = k.id
WHERE r.aggregate_id IS NOT NULL;
INSERT INTO @unlocked (id)
SELECT u.id
FROM ${SOURCES}
CROSS APPLY (
  SELECT TOP (@perSource) c.id
  FROM (
    SELECT TOP (@skipScan) c.id, c.source, c.aggregate_id, c.scheduled_at
    FROM ${t} AS c WITH (READPAST, ROWLOCK, READCOMMITTEDLOCK, INDEX(inbox_due))
    WHERE ${isSource('c.source')} AND c.state = N'pending' AND c.scheduled_at <= ${UTC_NOW}
    ORDER BY c.scheduled_at, c.id
  ) AS c
  WHERE c.aggregate_id IS NULL OR NOT EXISTS (
    SELECT 1 FROM @skipped AS k
    WHERE k.source = c.source AND DATALENGTH(k.source) = DATALENGTH(c.source)
      AND k.aggregate_id = c.aggregate_id COLLATE ${BINARY} AND DATALENGTH(k.aggregate_id) = DATALENGTH(c.aggregate_id)
  )
  ORDER BY c.scheduled_at, c.id
) AS u;
INSERT INTO @window (id, scheduled_at, chain, first_id)
SELECT d.id, d.scheduled_at,
  CASE WHEN d.aggregate_id IS NULL THEN NULL ELSE MAX(d.id) OVER (${chain}) END,
  CASE WHEN d.aggregate_id IS NULL THEN NULL ELSE MIN(d.id) OVER (${chain}) END
FROM @unlocked AS u
INNER JOIN ${t} AS d WITH (${TAKE}, FORCESEEK) ON d.id = u.id
WHERE d.state = N'pending' AND d.scheduled_at <= ${UTC_NOW};`,
    held: `INSERT INTO @held (id)
SELECT DISTINCT e.id
FROM @skipped AS k
INNER JOIN ${t} AS r WITH (FORCESEEK) ON r.id = k.id
CROSS APPLY (
  SELECT TOP (1) e.id
  FROM ${t} AS e
  WHERE ${sameAggregate('e', 'r')}
    AND e.state IN (N'pending', N'processing') AND e.aggregate_id IS NOT NULL
  ORDER BY e.id
) AS e
INNER JOIN ${t} AS a WITH (FORCESEEK) ON a.id = e.id
WHERE a.state = N'processing';
`,
  };
}

/**
 * The relay's claim on `executor` (`claimForRelay`): runs `claimRelayInboxStatement` and answers its rows by id,
 * with `blocked` when above 0 and `blockedBy` when not empty. Error 1222 — a wait for a lock past the batch's
 * LOCK_TIMEOUT, which rolled the whole transaction back — answers no rows and one blocked row: something holds a row
 * the claim had to read, so the relay tries again shortly instead of ending its drain. A row that cannot be read goes dead alone, as in `claimRows`.
 */
async function claimRelayRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  p: InboxClaimParameters,
): Promise<RelayClaimedRows> {
  const statement = claimRelayInboxStatement(schema, p);
  let answered: RawRow[];
  try {
    answered = (await executor.query<RawRow>(statement.text, statement.values)).rows;
  } catch (error) {
    if (isLockTimeout(error)) return Object.assign([], { blocked: 1 });
    throw error;
  }
  const blocked = Number(answered[0]?.blocked ?? 0);
  const blockedBy = blockedByOf(answered[0]?.blocked_by);
  const claimed = answered.filter((r) => r.id !== null && r.id !== undefined);
  const { rows, unreadable } = readClaimedRows(claimed, toRelayInboxRow, SQL_SERVER_READERS);
  if (unreadable.length > 0) {
    const dead = markInboxDeadStatement(schema, unreadable);
    await executor.query(dead.text, dead.values).catch(() => undefined);
  }
  const sorted = rows.sort((a, b) => compareIds(a.id, b.id));
  return Object.assign(
    sorted,
    blocked > 0 ? { blocked } : {},
    blockedBy.length > 0 ? { blockedBy } : {},
  ) as RelayClaimedRows;
}

/** The ids of the answer's `blocked_by` (FOR JSON PATH: `[{"id":"7"},…]`, NULL when none). */
function blockedByOf(value: unknown): string[] {
  if (typeof value !== 'string' || value === '') return [];
  const parsed: unknown = JSON.parse(value);
  if (!Array.isArray(parsed)) return [];
  return parsed.map((entry) => toRowId((entry as { id?: unknown }).id));
}

/**
 * The inbox store's `claim` (and, with `payload: false`, its `claimForRelay`: the rows without their payload, in the
 * order of each aggregate id, see `claimRelayRows`): one batch; error 1222 answers that nothing is claimable now,
 * and a claimed row that cannot be read goes dead alone (`unreadable row: …`, see `claimRows`).
 */
export async function claimInboxRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  options: InboxClaimOptions,
): Promise<InboxRow[]>;
export async function claimInboxRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  options: InboxClaimOptions & Pick<RelayClaimOptions, 'skipAggregatesOf'>,
  payload: false,
): Promise<RelayClaimedRows>;
export async function claimInboxRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  {
    sources,
    batchSize,
    leaseMs,
    takeOverExpired,
    skipAggregatesOf,
  }: InboxClaimOptions & Pick<RelayClaimOptions, 'skipAggregatesOf'>,
  payload = true,
): Promise<RelayClaimedRows> {
  const n = Math.floor(batchSize);
  if (!(n > 0) || sources.length === 0) return [];
  const skip = payload
    ? []
    : [...new Set((skipAggregatesOf ?? []).filter(isRowId))].slice(0, MAX_SKIPPED_AGGREGATES);
  const parameters = {
    sources: [...new Set(sources)],
    batchSize: n,
    leaseMs,
    takeOverExpired: takeOverExpired === true,
    payload,
    ...(skip.length === 0 ? {} : { skipAggregatesOf: skip }),
  };
  if (!payload) return claimRelayRows(executor, schema, parameters);
  const statement = claimInboxStatement(schema, parameters);
  return claimRows(executor, statement, payload ? toInboxRow : toRelayInboxRow, (unreadable) =>
    markInboxDeadStatement(schema, unreadable),
  );
}
