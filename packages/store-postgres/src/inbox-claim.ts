/**
 * The inbox claim of the relay and of pull workers: the statement that moves due rows of some sources
 * pending → processing under a lease (`claimInboxStatement`), and the store's claim that runs it
 * (`claimInboxRows`).
 */
import {
  type ForwardItem,
  type InboxClaimOptions,
  type InboxRow,
  MAX_SKIP_SCAN_ROWS,
  MAX_SKIPPED_AGGREGATES,
  type RelayClaimedRows,
  type RelayClaimOptions,
  type RelayInboxRow,
} from '@queuebox/core';
import { isRowId, readClaimedRows } from '@queuebox/sql-store-common';
import { releaseAnswered } from './claim-release.ts';
import type { PreparedGuard, SqlExecutor, Statement } from './executor.ts';
import { forwardInboxCtes, forwardInboxValues, markInboxDeadStatement } from './inbox-sql.ts';
import { inlineBytesFor, type LargeColumn, readOutsideColumns, sizedColumns } from './large-columns.ts';
import { INBOX_COLUMNS, POSTGRES_READERS, type RawRow, toInboxRow, toRowId } from './rows.ts';
import { inboxTable } from './schema-name.ts';

/** Maps a row of the relay's claim (no payload column, none read outside either). */
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
  /**
   * False: the relay's claim — the rows are answered without their payload (see `RELAY_INBOX_COLUMNS`), in the order
   * of each aggregate id (`relayClaimCtes`), never with takeover. Default true: pull workers' claims, any due rows
   * (several of one aggregate id together, whatever is active before them).
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

/**
 * The large columns of the relay's claim, sized and read outside when a row is too large: its headers and last_error.
 * It answers no payload (the forward copies it in SQL), so it neither counts nor reads one: counted, a row of a
 * large payload came back flagged and its payload was read in chunks that the relay dropped (100 rows of 50 KB: 48
 * Data API calls instead of 1).
 */
const RELAY_LARGE_COLUMNS: readonly LargeColumn[] = ['headers', 'last_error'];

/**
 * pending → processing for due rows of the sources, oldest first, with one new token and a lease; with
 * takeover, an expired processing row of the sources instead (processing → processing, attempt + 1): the one
 * with the oldest lease, alone — a claim that takes over answers that one row, never mixed with others, so a row
 * that crashes its worker is retried by itself and the rows of a crashed batch each on their own. Each source is
 * read from its own range of `inbox_due`, with `FOR UPDATE SKIP LOCKED`, so concurrent pull workers of one
 * source take different rows; rows locked but not chosen are released at the end of the statement.
 *
 * The relay's claim (`payload: false`) keeps the order of each aggregate id instead (`relayClaimCtes`), and every
 * answered row carries `blocked`, the rows it left blocked, and the first `blocked_by` (the ids of the rows holding
 * them back, text[]); when it claimed nothing it answers one row of NULLs with both.
 */
export function claimInboxStatement(schema: string, p: InboxClaimParameters): Statement {
  if (p.payload === false) {
    // The relay's claim: one row of NULLs carries `blocked` and `blocked_by` when nothing was claimed; else every row
    // `blocked` and the first `blocked_by`.
    return {
      text: `WITH ${claimInboxCtes(schema, p, 1)}
SELECT c.*, (SELECT n FROM blocked) AS blocked,
       CASE WHEN c.claim_order IS NULL OR c.claim_order = 1 THEN (SELECT ids FROM blocked_by) END AS blocked_by
FROM (SELECT 1) AS answer
LEFT JOIN (SELECT claimed.*, pg_catalog.row_number() OVER (ORDER BY claimed.id::bigint) AS claim_order FROM claimed) c ON true
ORDER BY c.claim_order`,
      values: claimInboxValues(p),
    };
  }
  return {
    text: `WITH ${claimInboxCtes(schema, p, 1)}
SELECT * FROM claimed ORDER BY id::bigint`,
    values: claimInboxValues(p),
  };
}

/**
 * The relay's claim (docs/design.md §5 Ordering): the CTEs `due`, `chains`, `earlier`, `keyed`, `heads`, `chosen`,
 * `blocked` (its one row `n`: the rows left blocked), `blocked_by` (its one row `ids`) and, with `skip`, `skipped`
 * and `held` (`skippedCtes`) for `claimInboxCtes`. The relay forwards an inbox row
 * into the outbox under its aggregate id as key, and outbox ids follow the forwards, so the rows of one source and
 * aggregate id must be claimed in id order: a row with an aggregate id is claimed only together with, or after,
 * every earlier row of its id that is pending or processing.
 *
 * - `due` (the window): per source, the first `batchSize` due pending rows in (scheduled_at, id) order from
 *   `inbox_due`, `FOR UPDATE SKIP LOCKED`, as every claim reads them; the LIMIT bounds the scan itself, so a claim
 *   reads at most `batchSize` rows per source however many rows of one aggregate id wait. (Filtering this scan by
 *   "no earlier active row" instead read the whole backlog of a busy id at every claim: 340 ms at 100,000 rows.)
 * - `chains`: the aggregate ids of the window, each named by its last window row's id (rows without an aggregate
 *   id skip all that follows — no join, no probe, no window function — and go to `chosen` as they are).
 * - `earlier`: per chain, one descent of `inbox_active_aggregate` to the oldest row of the id, below the chain's
 *   last window row, that is pending or processing in the statement's snapshot and neither in the window nor
 *   forwarded by this statement (`forwarded`: the forward-and-claim's rows, still processing in its snapshot). The
 *   descent reads the id's first `passes` + 1 active entries in index order (`passes`: the chain's window and
 *   forwarded rows, which any other row can only follow), so it passes over at most those, and over index entries
 *   of rows no longer active that vacuum has not removed yet, as the window's scan of `inbox_due` does. It starts at
 *   a row comparison and orders by all three index columns rather than saying `source = … AND aggregate_id = …
 *   ORDER BY id LIMIT 1`: that the planner may answer by walking the primary key from the smallest id, which
 *   statistics taken while one id's backlog was pending make look cheap, and which then reads every processed row
 *   below the window (`relay-aggregate-order.integration.test.ts`, "stale"). A window row above the earlier row is
 *   blocked: an earlier row of its id is active elsewhere (another relay holds or has claimed it, a claim of it is
 *   not committed yet, a crashed relay's lease runs, or it is pending outside the window). Window rows below it are
 *   claimable, so consecutive rows of a busy id go together, a whole batch per claim (`keyed`: the window rows
 *   with an aggregate id, their chain and its earlier row).
 * - `heads`: when that earlier row is older than every window row of its chain it is the oldest active row of the
 *   id; if it is pending and due it is locked (`SKIP LOCKED`) and becomes a candidate. Without this an operator's
 *   requeue of an old row (scheduled now, so it sorts after the later rows of its id) would stall: the window would
 *   hold only rows it blocks. A processing head, or one another claimer has locked, is not taken: the id waits.
 * - `chosen`: the unblocked window rows and the heads, at most `batchSize`, oldest first, but never a later row of
 *   an id without its earlier candidates: a keyed row sorts by the earliest `scheduled_at` among itself and the later
 *   candidates of its id (non-decreasing in id order along a chain, ties by id), so every prefix of the order keeps
 *   whole chain prefixes and a batch is full whenever enough candidates exist.
 * - `blocked`: window rows left pending for an earlier row of their id, except those whose earlier row is pending
 *   and not due yet (claiming again soon would not help them); `blocked_by`: the ids of those earlier rows (one per
 *   chain), after the rows of `held`, at most MAX_SKIPPED_AGGREGATES. The relay skips their aggregate ids in its next
 *   claim (`skip`, see `skippedCtes`): with a crashed relay's rows processing until their lease expires, the later
 *   rows of their ids are the oldest pending ones and would otherwise fill every window.
 *
 * Rows locked but not chosen are released at the end of the statement. Rows of one id that commit out of id order
 * (two concurrent stores) are forwarded in the order the claims see them.
 */
function relayClaimCtes(
  t: string,
  sources: string,
  batchSize: string,
  forwarded?: string,
  skip?: string,
): string {
  const [forwardedChains, forwardedPasses, notForwarded] =
    forwarded === undefined
      ? ['', '', '']
      : [
          `
  LEFT JOIN (
    SELECT f.source, f.aggregate_id, pg_catalog.count(*)::int AS n FROM ${forwarded} f
    WHERE f.aggregate_id IS NOT NULL GROUP BY f.source, f.aggregate_id
  ) fc ON fc.source = d.source AND fc.aggregate_id = d.aggregate_id`,
          ' + coalesce(pg_catalog.max(fc.n), 0)',
          `
      AND x.id NOT IN (SELECT f.id FROM ${forwarded} f)`,
        ];
  const skipping = skip === undefined ? undefined : skippedCtes(t, skip, forwarded, notForwarded);
  const window =
    skipping?.window(batchSize) ??
    `SELECT i.id, i.source, i.aggregate_id, i.scheduled_at FROM ${t} i
    WHERE i.source = s.source AND i.state = 'pending' AND i.scheduled_at <= pg_catalog.now()
    ORDER BY i.scheduled_at, i.id
    LIMIT ${batchSize}::int
    FOR UPDATE SKIP LOCKED`;
  return `${skipping?.skipped ?? ''}due AS (
  SELECT w.id, w.source, w.aggregate_id, w.scheduled_at
  FROM pg_catalog.unnest(${sources}::text[]) AS s(source)
  CROSS JOIN LATERAL (
    ${window}
  ) w
),
chains AS (
  SELECT d.source, d.aggregate_id, pg_catalog.min(d.id) AS first_id, pg_catalog.max(d.id) AS last_id,
         pg_catalog.count(*)::int${forwardedPasses} AS passes
  FROM due d${forwardedChains}
  WHERE d.aggregate_id IS NOT NULL
  GROUP BY d.source, d.aggregate_id
),
earlier AS (
  SELECT c.last_id AS chain, c.first_id, x.id, x.state, x.scheduled_at
  FROM chains c
  CROSS JOIN LATERAL (
    SELECT x.id, x.state, x.scheduled_at FROM (
      SELECT e.id, e.source, e.aggregate_id, e.state, e.scheduled_at FROM ${t} e
      WHERE (e.source, e.aggregate_id, e.id) >= (c.source, c.aggregate_id, 0::bigint)
        AND e.state IN ('pending', 'processing') AND e.aggregate_id IS NOT NULL
      ORDER BY e.source, e.aggregate_id, e.id
      LIMIT c.passes + 1
    ) x
    WHERE x.source = c.source AND x.aggregate_id = c.aggregate_id AND x.id < c.last_id
      AND x.id NOT IN (SELECT d.id FROM due d)${notForwarded}
    ORDER BY x.id
    LIMIT 1
  ) x
),
keyed AS (
  SELECT d.id, d.scheduled_at, c.last_id AS chain, b.id AS earlier_id, b.state AS earlier_state,
         b.scheduled_at AS earlier_at
  FROM due d
  JOIN chains c ON c.source = d.source AND c.aggregate_id = d.aggregate_id
  LEFT JOIN earlier b ON b.chain = c.last_id
  WHERE d.aggregate_id IS NOT NULL
),
heads AS (
  SELECT h.id, h.scheduled_at, b.chain
  FROM earlier b
  CROSS JOIN LATERAL (
    SELECT i.id, i.scheduled_at FROM ${t} i
    WHERE i.id = b.id AND i.state = 'pending' AND i.scheduled_at <= pg_catalog.now()
    FOR UPDATE SKIP LOCKED
  ) h
  WHERE b.id < b.first_id AND b.state = 'pending' AND b.scheduled_at <= pg_catalog.now()
),
chosen AS (
  SELECT c.id FROM (
    SELECT d.id, d.scheduled_at AS since FROM due d WHERE d.aggregate_id IS NULL
    UNION ALL
    SELECT k.id, pg_catalog.min(k.scheduled_at) OVER (PARTITION BY k.chain ORDER BY k.id DESC ROWS UNBOUNDED PRECEDING)
    FROM (
      SELECT k.id, k.scheduled_at, k.chain FROM keyed k WHERE k.earlier_id IS NULL OR k.id < k.earlier_id
      UNION ALL
      SELECT h.id, h.scheduled_at, h.chain FROM heads h
    ) k
  ) c
  ORDER BY c.since, c.id
  LIMIT ${batchSize}::int
),
blocked AS (
  SELECT pg_catalog.count(*)::int AS n FROM keyed k
  WHERE k.earlier_id < k.id AND (k.earlier_state = 'processing' OR k.earlier_at <= pg_catalog.now())
),${skipping?.held ?? ''}
blocked_by AS (
  SELECT ARRAY(
    SELECT b.id::text FROM (
      SELECT DISTINCT k.earlier_id AS id, 1 AS window_row FROM keyed k
      WHERE k.earlier_id < k.id AND (k.earlier_state = 'processing' OR k.earlier_at <= pg_catalog.now())${
        skipping === undefined ? '' : '\n      UNION ALL\n      SELECT h.id, 0 FROM held h'
      }
    ) b
    ORDER BY b.window_row, b.id
    LIMIT ${MAX_SKIPPED_AGGREGATES}
  ) AS ids
)`;
}

/**
 * The parts of the relay's claim that skip aggregate ids (`RelayClaimOptions.skipAggregatesOf`, the parameter
 * `skip`: row ids), only in the text of a claim that skips some:
 *
 * - `skipped`: the (source, aggregate id) of each of those rows that has one (read by primary key), with `passes`,
 *   how many rows of it this statement forwards.
 * - `window`: the window of `due` without the rows of those ids. The due rows are read in (scheduled_at, id) order
 *   from `inbox_due` without a lock, at most MAX_SKIP_SCAN_ROWS per source; a row of a skipped id is passed over (a
 *   hashed lookup); each other row is then locked by primary key, `FOR UPDATE SKIP LOCKED` with the pending and due
 *   test again (a row another claimer took meanwhile is passed over), until `batchSize` are locked. The skipped
 *   ids' rows ahead are read, one heap tuple each (their aggregate id is in the table, not the index), but neither
 *   locked nor kept: the scan's LIMIT bounds that cost (docs/design.md §5).
 * - `held`: per skipped id, one descent of `inbox_active_aggregate` to its oldest active row not forwarded by this
 *   statement (as `earlier` does); when that row is processing, the id is still held back and its id goes into
 *   `blocked_by`, so the relay goes on skipping the id; otherwise the next claim reads it again (a pending head
 *   is then claimed as the window and `heads` decide).
 */
function skippedCtes(
  t: string,
  skip: string,
  forwarded: string | undefined,
  notForwarded: string,
): { skipped: string; window: (batchSize: string) => string; held: string } {
  const rows = `SELECT DISTINCT r.source, r.aggregate_id FROM ${t} r
    WHERE r.id = ANY (${skip}::bigint[]) AND r.aggregate_id IS NOT NULL`;
  const skipped =
    forwarded === undefined
      ? `skipped AS (
  SELECT r.source, r.aggregate_id, 0 AS passes FROM (
    ${rows}
  ) r
),
`
      : `skipped AS (
  SELECT r.source, r.aggregate_id, pg_catalog.count(f.id)::int AS passes FROM (
    ${rows}
  ) r
  LEFT JOIN ${forwarded} f ON f.source = r.source AND f.aggregate_id = r.aggregate_id
  GROUP BY r.source, r.aggregate_id
),
`;
  return {
    skipped,
    window: (batchSize) => `SELECT l.id, l.source, l.aggregate_id, l.scheduled_at
    FROM (
      SELECT i.id, i.source, i.aggregate_id FROM ${t} i
      WHERE i.source = s.source AND i.state = 'pending' AND i.scheduled_at <= pg_catalog.now()
      ORDER BY i.scheduled_at, i.id
      LIMIT ${MAX_SKIP_SCAN_ROWS}
    ) c
    CROSS JOIN LATERAL (
      SELECT l.id, l.source, l.aggregate_id, l.scheduled_at FROM ${t} l
      WHERE l.id = c.id AND l.state = 'pending' AND l.scheduled_at <= pg_catalog.now()
      FOR UPDATE SKIP LOCKED
    ) l
    WHERE c.aggregate_id IS NULL OR (c.source, c.aggregate_id) NOT IN (SELECT k.source, k.aggregate_id FROM skipped k)
    LIMIT ${batchSize}::int`,
    held: `
held AS (
  SELECT x.id FROM skipped k
  CROSS JOIN LATERAL (
    SELECT x.id, x.state FROM (
      SELECT e.id, e.source, e.aggregate_id, e.state FROM ${t} e
      WHERE (e.source, e.aggregate_id, e.id) >= (k.source, k.aggregate_id, 0::bigint)
        AND e.state IN ('pending', 'processing') AND e.aggregate_id IS NOT NULL
      ORDER BY e.source, e.aggregate_id, e.id
      LIMIT k.passes + 1
    ) x
    WHERE x.source = k.source AND x.aggregate_id = k.aggregate_id${notForwarded}
    ORDER BY x.id
    LIMIT 1
  ) x
  WHERE x.state = 'processing'
),`,
  };
}

/**
 * The CTEs of `claimInboxStatement` (`expired`, `due`, `chosen`, `token`, `claimed`: the claimed rows), reading
 * `claimInboxValues` as the parameters `$at` … `$at+3`, so another statement can claim too (the relay's
 * forward-and-claim, inbox-sql.ts). `expired` holds at most one row (takeover only); when it holds one, `due`
 * reads and locks nothing (a one-time filter), so that row is claimed alone. The relay's claim (`payload: false`)
 * is `relayClaimCtes` then `token` and `claimed`, reading `$at` … `$at+2` (and `$at+3`, the rows whose aggregate ids
 * it skips, when there are some); `forwarded` names the CTE of the same statement whose rows it forwards (their ids,
 * sources and aggregate ids), which then hold back no later row of their aggregate ids.
 */
export function claimInboxCtes(
  schema: string,
  p: InboxClaimParameters,
  at: number,
  forwarded?: string,
): string {
  const t = inboxTable(schema);
  const [sources, batchSize, leaseMs, takeOver] = [`$${at}`, `$${at + 1}`, `$${at + 2}`, `$${at + 3}`];
  if (p.payload === false) {
    if (p.takeOverExpired) throw new Error("The relay's claim never takes over expired claims");
    const skip = (p.skipAggregatesOf?.length ?? 0) > 0 ? `$${at + 3}` : undefined;
    return `${relayClaimCtes(t, sources, batchSize, forwarded, skip)},
${claimedCtes(t, p, leaseMs)}`;
  }
  return `expired AS (
  SELECT i.id, 0 AS rank, i.lease_until AS since FROM ${t} i
  WHERE ${takeOver}::boolean AND i.state = 'processing' AND i.lease_until < pg_catalog.now() AND i.source = ANY(${sources}::text[])
  ORDER BY i.lease_until, i.id
  LIMIT 1
  FOR UPDATE SKIP LOCKED
),
due AS (
  SELECT d.id, 1 AS rank, d.scheduled_at AS since
  FROM pg_catalog.unnest(${sources}::text[]) AS s(source)
  CROSS JOIN LATERAL (
    SELECT i.id, i.scheduled_at FROM ${t} i
    WHERE i.source = s.source AND i.state = 'pending' AND i.scheduled_at <= pg_catalog.now()
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
${claimedCtes(t, p, leaseMs)}`;
}

/** `token` and `claimed` (the rows of `chosen` go processing), the end of both claims. */
function claimedCtes(t: string, p: InboxClaimParameters, leaseMs: string): string {
  return `token AS (SELECT pg_catalog.gen_random_uuid() AS value),
claimed AS (
  UPDATE ${t} i
  SET attempt = i.attempt + CASE WHEN i.state = 'processing' THEN 1 ELSE 0 END,
      state = 'processing',
      claim_token = (SELECT value FROM token),
      lease_until = pg_catalog.now() + ${leaseMs}::float8 * interval '1 millisecond',
      updated_at = pg_catalog.now()
  WHERE i.id = ANY (ARRAY(SELECT id FROM chosen))
  RETURNING ${p.payload === false ? sizedColumns(RELAY_INBOX_COLUMNS, 'inbox', 'i', p.inlineBytes, RELAY_LARGE_COLUMNS) : sizedColumns(INBOX_COLUMNS, 'inbox', 'i', p.inlineBytes)}
)`;
}

/**
 * The parameters of `claimInboxCtes`, in order (the relay's claim reads no takeover flag, and the rows it skips only
 * when there are some).
 */
export function claimInboxValues(p: InboxClaimParameters): unknown[] {
  if (p.payload !== false) return [p.sources, p.batchSize, p.leaseMs, p.takeOverExpired];
  const skip = p.skipAggregatesOf ?? [];
  return skip.length > 0 ? [p.sources, p.batchSize, p.leaseMs, skip] : [p.sources, p.batchSize, p.leaseMs];
}

/**
 * The parameters of a claim of `options` on `executor` (sources deduplicated, the batch size whole, the inline
 * size of the executor's result limits), or undefined when it can claim nothing.
 */
export function inboxClaimParameters(
  executor: Pick<SqlExecutor, 'resultLimits'>,
  {
    sources,
    batchSize,
    leaseMs,
    takeOverExpired,
    skipAggregatesOf,
  }: InboxClaimOptions & Pick<RelayClaimOptions, 'skipAggregatesOf'>,
  payload: boolean,
): InboxClaimParameters | undefined {
  const n = Math.floor(batchSize);
  if (!(n > 0) || sources.length === 0) return undefined;
  const limits = executor.resultLimits;
  const skip = payload ? [] : skippedRowIds(skipAggregatesOf);
  return {
    sources: [...new Set(sources)],
    batchSize: n,
    leaseMs,
    takeOverExpired: takeOverExpired === true,
    payload,
    ...(limits === undefined
      ? {}
      : { inlineBytes: inlineBytesFor(limits, n, payload ? 0 : BLOCKED_BY_MAX_BYTES) }),
    ...(skip.length === 0 ? {} : { skipAggregatesOf: skip }),
  };
}

/**
 * Most bytes of the relay claim's `blocked_by` (in its first answered row): MAX_SKIPPED_AGGREGATES row ids of at
 * most 19 digits, each with a separator. A relay claim's rows leave it room under a result row limit (the RDS Data
 * API: 64 KB per row; `inlineBytesFor`): at a small batch a row's inline share is that limit less 8 KiB, and a first
 * row with large headers and 1000 ids of 11 digits beside them was over it (the claim failed).
 */
export const BLOCKED_BY_MAX_BYTES = MAX_SKIPPED_AGGREGATES * 20;

/** The valid, distinct row ids of `ids`, at most MAX_SKIPPED_AGGREGATES (the first). */
function skippedRowIds(ids: readonly string[] | undefined): string[] {
  return [...new Set((ids ?? []).filter(isRowId))].slice(0, MAX_SKIPPED_AGGREGATES);
}

/**
 * Reads the rows a claim answered: their large columns read outside when flagged (the relay's: headers and
 * last_error, never the payload), each mapped alone, and the rows that cannot be read sent dead (best effort, or
 * their lease expires as after a crash).
 */
export async function readClaimedInboxRows(
  executor: SqlExecutor,
  schema: string,
  answered: RawRow[],
  payload: boolean,
): Promise<RelayInboxRow[]> {
  if (answered.length === 0) return [];
  const large = payload ? undefined : RELAY_LARGE_COLUMNS;
  let read: ReturnType<typeof readClaimedRows<RelayInboxRow>>;
  try {
    await readOutsideColumns(executor, schema, 'inbox', answered, executor.resultLimits, large);
    read = readClaimedRows(answered, payload ? toInboxRow : toRelayInboxRow, POSTGRES_READERS);
  } catch (error) {
    await releaseAnswered(executor, schema, 'inbox', answered);
    throw error;
  }
  const { rows, unreadable } = read;
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
 * the forward's `forwarded` and `outbox_ids` arrays and the claim's `blocked_by`, the others NULL, and every row the
 * claim's `blocked` (the relay's claim; NULL otherwise). The claim sees the forwarded rows still processing (one
 * snapshot), so the relay's claim passes over them: the next row of an aggregate id is claimed by the statement that
 * forwards the one before.
 * When an item's outbox row has a key, run `lockOutboxKeysStatement` first in the same transaction (the store does).
 */
export function forwardAndClaimInboxStatement(
  schema: string,
  items: readonly ForwardItem[],
  claim: InboxClaimParameters,
): Statement {
  const [blocked, blockedBy] =
    claim.payload === false
      ? ['(SELECT n FROM blocked)', '(SELECT ids FROM blocked_by)']
      : ['NULL::int', 'NULL::text[]'];
  return {
    text: `WITH ${forwardInboxCtes(schema)},
${claimInboxCtes(schema, claim, 9, 'forwarded')},
report AS (
  SELECT (SELECT coalesce(pg_catalog.array_agg(id::text), '{}') FROM forwarded) AS forwarded,
         (SELECT coalesce(pg_catalog.array_agg(id::text ORDER BY id), '{}') FROM inserted) AS outbox_ids,
         ${blocked} AS blocked, ${blockedBy} AS blocked_by
)
SELECT CASE WHEN c.claim_order IS NULL OR c.claim_order = 1 THEN r.forwarded END AS forwarded,
       CASE WHEN c.claim_order IS NULL OR c.claim_order = 1 THEN r.outbox_ids END AS outbox_ids,
       CASE WHEN c.claim_order IS NULL OR c.claim_order = 1 THEN r.blocked_by END AS blocked_by,
       r.blocked, c.*
FROM report r
LEFT JOIN (SELECT claimed.*, pg_catalog.row_number() OVER (ORDER BY claimed.id::bigint) AS claim_order FROM claimed) c ON true
ORDER BY c.claim_order`,
    values: [...forwardInboxValues(items), ...claimInboxValues(claim)],
  };
}

/**
 * The relay's claim as the port answers it (`RelayClaimedRows`): the rows a relay claim (or forward-and-claim)
 * answered, read as `readClaimedInboxRows` does, with `blocked` from its answer when above 0 and `blockedBy` (its
 * first row's `blocked_by`) when not empty. `answered` may hold the one row of NULLs of a claim that took nothing.
 */
export async function readRelayClaim(
  executor: SqlExecutor,
  schema: string,
  answered: readonly RawRow[],
): Promise<RelayClaimedRows> {
  const blocked = Number(answered[0]?.blocked ?? 0);
  const blockedBy = ((answered[0]?.blocked_by as unknown[] | null | undefined) ?? []).map(toRowId);
  const claimed = answered.filter((r) => r.id !== null && r.id !== undefined);
  const rows: RelayClaimedRows = await readClaimedInboxRows(executor, schema, claimed, false);
  return Object.assign(
    rows,
    blocked > 0 ? { blocked } : {},
    blockedBy.length > 0 ? { blockedBy } : {},
  ) as RelayClaimedRows;
}

/**
 * The inbox store's `claim` (and, with `payload: false`, its `claimForRelay`: the rows without their payload, in the
 * order of each aggregate id, with `blocked`): one statement, through `prepared` when given (the relay's); a claimed
 * row that cannot be read goes dead alone (best effort, or its lease expires as after a crash).
 */
export async function claimInboxRows(
  executor: SqlExecutor,
  schema: string,
  options: InboxClaimOptions,
): Promise<InboxRow[]>;
export async function claimInboxRows(
  executor: SqlExecutor,
  schema: string,
  options: InboxClaimOptions & Pick<RelayClaimOptions, 'skipAggregatesOf'>,
  payload: false,
  prepared?: PreparedGuard,
): Promise<RelayClaimedRows>;
export async function claimInboxRows(
  executor: SqlExecutor,
  schema: string,
  options: InboxClaimOptions & Pick<RelayClaimOptions, 'skipAggregatesOf'>,
  payload = true,
  prepared?: PreparedGuard,
): Promise<RelayClaimedRows> {
  const parameters = inboxClaimParameters(executor, options, payload);
  if (parameters === undefined) return [];
  const { text, values } = claimInboxStatement(schema, parameters);
  const answered = (
    prepared
      ? await prepared.query<RawRow>(executor, text, values)
      : await executor.query<RawRow>(text, values)
  ).rows;
  if (!payload) return readRelayClaim(executor, schema, answered);
  return readClaimedInboxRows(executor, schema, answered, payload);
}
