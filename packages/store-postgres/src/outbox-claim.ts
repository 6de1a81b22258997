/**
 * The outbox claim: the statement that moves due rows pending → processing under a lease, keeping per-key order
 * (`claimOutboxStatement`), and the store's claim that runs it (`createOutboxClaim`).
 */
import { randomUUID } from 'node:crypto';
import type { ClaimOptions, OutboxRow } from '@queuebox/core';
import { readClaimedRows, type UnreadableClaim } from '@queuebox/sql-store-common';
import { releaseAnswered } from './claim-release.ts';
import { createPreparedGuard, type PreparedGuard, type SqlExecutor, type Statement } from './executor.ts';
import {
  deferredPayloadColumns,
  inlineBytesFor,
  markDeferredPayloads,
  readOutsideColumns,
  sizedColumns,
} from './large-columns.ts';
import { markOutboxDeadStatement } from './outbox-sql.ts';
import { compareIds, OUTBOX_COLUMNS, POSTGRES_READERS, type RawRow, toOutboxRow } from './rows.ts';
import { outboxTable } from './schema-name.ts';

/**
 * Joined into the final SELECT of both claims: the claim's own transaction commits without waiting for its WAL to be
 * flushed (`synchronous_commit` off for this transaction only: `set_config(…, true)`; it is in effect when the
 * statement's implicit transaction commits, and the session keeps its own setting). A claim lost with the last
 * moments of WAL when the database server crashes leaves its rows pending, as if it had never run. Nothing is lost
 * and nothing is delivered more often than with a durable claim: a row whose settle committed has a durable claim
 * too (settles commit as the server is configured, synchronously by default, and a flush makes all earlier WAL
 * durable, the claim's included), and a row delivered but not settled at the crash is delivered again either way
 * (after its lease with a durable claim, at once with a lost one). What it buys: the row that woke an idle drain no
 * longer waits for a WAL flush before its delivery starts (bench/README.md, "Session 8").
 */
export const CLAIM_COMMITS_ASYNCHRONOUSLY = `CROSS JOIN (SELECT pg_catalog.set_config('synchronous_commit', 'off', true)) AS commit_mode`;

/** Parameters of `claimOutboxStatement`. */
export interface OutboxClaimParameters {
  /** Most rows to claim. */
  readonly batchSize: number;
  /**
   * Places kept for unkeyed rows when due ones exist (0…batchSize); keyed heads take the rest first, then unkeyed
   * rows fill what the keys left. Alternating it between ⌊n/2⌋ and ⌈n/2⌉ keeps either kind from starving.
   */
  readonly unkeyedReserve: number;
  readonly leaseMs: number;
  /** The key walk starts after this key and wraps around to it; `null` starts at the smallest key. */
  readonly startAfterKey: string | null;
  /** Most distinct keys one claim visits. */
  readonly keyScanLimit: number;
  /** The claim token written to every claimed row (a UUID). */
  readonly claimToken: string;
  /** Rows larger than this answer their large columns outside (`sizedColumns`). Default: all inline. */
  readonly inlineBytes?: number;
  /**
   * Without `inlineBytes`: payloads larger than this are answered NULL with their size (`deferredPayloadColumns`).
   * Default: every payload answered.
   */
  readonly deferBytes?: number;
}

/**
 * What a caller adds to core's `ClaimOptions` to have payloads over `deferPayloadsOverBytes` left out of the claim's
 * answer (pg / PGlite; the Data API keeps its own limits): each such row carries its payload's size under
 * `DEFERRED_PAYLOAD`, and the caller reads it (`get`) when it needs it. `@queuebox/outbox`'s poller sets it to
 * `DEFERRED_PAYLOAD_BYTES`.
 */
export interface DeferredPayloadClaimOptions {
  readonly deferPayloadsOverBytes?: number;
}

/**
 * The `claimed` step both claims end with: the rows locked at `ctids` (the versions this statement locked, so a
 * TID scan finds them) move to processing with the claim token and a lease on the database clock, re-checked as
 * pending, answering their columns: with result limits (the Data API) large ones outside (`sizedColumns`); else,
 * when the caller asked (`deferPayloadsOverBytes`), every column but a payload over that, which is answered NULL
 * with its size (`deferredPayloadColumns`) and read by the poller just before its delivery.
 *
 * It finds them by `ctid IN (…)`, a nested loop of TID scans: both claims run as named statements, and a generic
 * plan made while the table was small and never analyzed keeps a TID scan for the join, where it would keep a
 * sequential scan for `ctid = ANY (ARRAY(…))`, which reads the whole table at every claim once it has grown.
 */
function claimedCte(
  t: string,
  at: { readonly token: string; readonly lease: string; readonly ctids: string },
  inlineBytes: number | undefined,
  deferBytes: number | undefined,
): string {
  return `claimed AS (
  UPDATE ${t} o
  SET state = 'processing',
      claim_token = ${at.token}::uuid,
      lease_until = pg_catalog.now() + ${at.lease}::float8 * interval '1 millisecond',
      updated_at = pg_catalog.now()
  WHERE o.ctid IN (${at.ctids}) AND o.state = 'pending'
  RETURNING ${
    inlineBytes === undefined && deferBytes !== undefined
      ? deferredPayloadColumns(OUTBOX_COLUMNS, 'o', deferBytes)
      : sizedColumns(OUTBOX_COLUMNS, 'outbox', 'o', inlineBytes)
  }
)`;
}

/**
 * The claim (docs/design.md §5 Ordering). One statement:
 *
 * - `walk` is a recursive loose index scan over the partial index `outbox_active_key` (key, id of pending and
 *   processing rows): each step is one descent to the first entry after the previous key, in (key, id) order,
 *   and that entry is the next key's head, the smallest id of the key that is pending or processing. It starts
 *   after `startAfterKey`, wraps around to the smallest key, visits at most `keyScanLimit` keys, and is
 *   evaluated lazily, so it stops as soon as the batch is full.
 * - `reserve` counts the due unkeyed rows (at most `unkeyedReserve`) whose places the keyed heads must leave. It
 *   reads nothing when the walk found no key at all: then every place is an unkeyed one anyway.
 * - `keyed` takes, in walk order (LATERAL keeps the nested-loop order), the heads that are pending and due: a
 *   processing or retrying head holds its key back, and rows behind a head are never candidates. Each head is
 *   found again by the ctid the walk read it at (a TID scan, not another descent of the primary key), locked
 *   with `FOR UPDATE SKIP LOCKED` (a row another claimer holds is skipped, not waited for), and re-checked on the
 *   locked version: a head that a concurrent claim took after this statement's snapshot has a newer version,
 *   which fails the ctid and `state = 'pending'` checks and is dropped (counted as `contended`). `LIMIT` counts
 *   locked rows only.
 * - `recent` takes due keyed heads the walk could not reach: only when the walk visited `keyScanLimit` keys
 *   without filling the keyed places (keys whose head is not due, scheduled later or waiting for a retry, take
 *   places in the walk and give no row: an outside audit measured p50 5 s for a new keyed row beside 100,000 keys
 *   scheduled an hour ahead, since the walk reached it only after K ÷ 1,000 polls). It reads the newest
 *   `keyScanLimit` rows by id (the primary key, backwards), keeps per key the smallest due pending one, and takes it
 *   when no smaller id of its key is pending or processing (one probe of `outbox_active_key`, the walk's own head
 *   rule), locked and re-checked as `keyed` is; a key `keyed` took is left out. So a row written since the last
 *   few polls is claimed at once; an older one, or one whose head became due later, waits for the walk as before.
 * - `unkeyed` takes due rows without a key from `outbox_due_unkeyed`, oldest first, for the remaining places.
 * - `claimed` moves them to processing with the claim token and a lease on the database clock. It finds them by
 *   the ctid of the version this statement locked (a TID scan instead of a second descent of the primary key per
 *   row): the row lock keeps any other transaction from making a newer one first, and `state = 'pending'` is
 *   checked once more.
 * - `cursor` answers where the next walk should start (after the last key claimed when the batch filled, else
 *   after the last key visited, so keys beyond a long blocked stretch are reached), and whether candidate heads
 *   were lost to concurrent claimers (`contended`): then an empty answer does not mean "nothing to claim".
 *   It reads the walk to its end only when the keyed places were not filled, that is when the walk already ran
 *   out, so that costs nothing.
 *
 * Rows come back ordered by id, each with `next_key`, `contended` and `any_key` (whether the walk found an active
 * key at all); when nothing was claimed one row of NULLs carries them.
 */
export function claimOutboxStatement(schema: string, p: OutboxClaimParameters): Statement {
  const t = outboxTable(schema);
  const head = `o.key::text AS key, o.id AS head_id, o.ctid AS head_ctid, o.state = 'pending' AND o.scheduled_at <= pg_catalog.now() AS claimable`;
  const active = `o.state IN ('pending', 'processing')`;
  return {
    text: `WITH RECURSIVE walk (key, head_id, head_ctid, claimable, ord, wrapped) AS (
  (
    SELECT first.key, first.head_id, first.head_ctid, first.claimable, 1, first.wrapped FROM (
      (SELECT ${head}, false AS wrapped FROM ${t} o
        WHERE ${active} AND o.key > $3::text ORDER BY o.key, o.id LIMIT 1)
      UNION ALL
      (SELECT ${head}, true FROM ${t} o
        WHERE ${active} AND o.key IS NOT NULL ORDER BY o.key, o.id LIMIT 1)
    ) first
    LIMIT 1
  )
  UNION ALL
  SELECT step.key, step.head_id, step.head_ctid, step.claimable, w.ord + 1, step.wrapped
  FROM walk w
  CROSS JOIN LATERAL (
    SELECT nxt.* FROM (
      (SELECT ${head}, w.wrapped AS wrapped FROM ${t} o
        WHERE ${active} AND o.key > w.key ORDER BY o.key, o.id LIMIT 1)
      UNION ALL
      (SELECT ${head}, true FROM ${t} o
        WHERE NOT w.wrapped AND ${active} AND o.key IS NOT NULL ORDER BY o.key, o.id LIMIT 1)
    ) nxt
    LIMIT 1
  ) step
  WHERE w.ord < $4::int AND (NOT step.wrapped OR $3::text IS NULL OR step.key <= $3::text)
),
reserve AS (
  SELECT $1::int - pg_catalog.count(*)::int AS keyed_places FROM (
    SELECT 1 FROM ${t} o
    WHERE o.state = 'pending' AND o.key IS NULL AND o.scheduled_at <= pg_catalog.now() AND EXISTS (SELECT 1 FROM walk)
    ORDER BY o.scheduled_at, o.id
    LIMIT $2::int
  ) due_unkeyed
),
keyed AS (
  SELECT l.id, l.ctid, w.key, w.ord
  FROM walk w
  CROSS JOIN LATERAL (
    SELECT o.id, o.ctid FROM ${t} o
    WHERE o.ctid = w.head_ctid AND o.id = w.head_id AND o.state = 'pending' AND o.scheduled_at <= pg_catalog.now()
    FOR UPDATE SKIP LOCKED
  ) l
  WHERE w.claimable
  LIMIT (SELECT keyed_places FROM reserve)
),
recent AS (
  SELECT l.id, l.ctid
  FROM (
    SELECT DISTINCT ON (n.key) n.key, n.id
    FROM (SELECT o.id, o.key::text AS key, o.state, o.scheduled_at FROM ${t} o ORDER BY o.id DESC LIMIT $4::int) n
    WHERE n.state = 'pending' AND n.key IS NOT NULL AND n.scheduled_at <= pg_catalog.now()
      AND (SELECT pg_catalog.count(*) FROM walk) >= $4::int
      AND (SELECT pg_catalog.count(*) FROM keyed) < (SELECT keyed_places FROM reserve)
    ORDER BY n.key, n.id
  ) r
  CROSS JOIN LATERAL (
    SELECT o.id, o.ctid FROM ${t} o
    WHERE o.id = r.id AND o.state = 'pending' AND o.scheduled_at <= pg_catalog.now()
      AND NOT EXISTS (
        SELECT 1 FROM ${t} e
        WHERE e.key = r.key AND e.key IS NOT NULL AND ${active.replaceAll('o.', 'e.')} AND e.id < r.id
      )
      AND NOT EXISTS (SELECT 1 FROM keyed k WHERE k.key = r.key)
    FOR UPDATE SKIP LOCKED
  ) l
  LIMIT (SELECT keyed_places - (SELECT pg_catalog.count(*)::int FROM keyed) FROM reserve)
),
unkeyed AS (
  SELECT o.id, o.ctid FROM ${t} o
  WHERE o.state = 'pending' AND o.key IS NULL AND o.scheduled_at <= pg_catalog.now()
  ORDER BY o.scheduled_at, o.id
  LIMIT (SELECT $1::int - pg_catalog.count(*)::int FROM (SELECT id FROM keyed UNION ALL SELECT id FROM recent) c)
  FOR UPDATE OF o SKIP LOCKED
),
${claimedCte(t, { token: '$6', lease: '$5', ctids: 'SELECT ctid FROM keyed UNION ALL SELECT ctid FROM recent UNION ALL SELECT ctid FROM unkeyed' }, p.inlineBytes, p.deferBytes)},
cursor AS (
  SELECT
    CASE
      WHEN (SELECT keyed_places FROM reserve) <= 0 THEN $3::text
      WHEN (SELECT pg_catalog.count(*) FROM keyed) < (SELECT keyed_places FROM reserve)
        THEN (SELECT w.key FROM walk w ORDER BY w.ord DESC LIMIT 1)
      ELSE (SELECT k.key FROM keyed k ORDER BY k.ord DESC LIMIT 1)
    END AS next_key,
    CASE
      WHEN (SELECT keyed_places FROM reserve) > 0
       AND (SELECT pg_catalog.count(*) FROM keyed) < (SELECT keyed_places FROM reserve)
        THEN (SELECT pg_catalog.count(*) FROM walk w WHERE w.claimable) > (SELECT pg_catalog.count(*) FROM keyed)
      ELSE false
    END AS contended,
    EXISTS (SELECT 1 FROM walk) AS any_key
)
SELECT claimed.*, cursor.next_key, cursor.contended, cursor.any_key
FROM cursor LEFT JOIN claimed ON true ${CLAIM_COMMITS_ASYNCHRONOUSLY}
ORDER BY claimed.id::bigint`,
    values: [p.batchSize, p.unkeyedReserve, p.startAfterKey, p.keyScanLimit, p.leaseMs, p.claimToken],
  };
}

/** Parameters of `claimUnkeyedOutboxStatement`. */
export interface UnkeyedOutboxClaimParameters {
  /** Most rows to claim. */
  readonly batchSize: number;
  readonly leaseMs: number;
  /** The claim token written to every claimed row (a UUID). */
  readonly claimToken: string;
  /**
   * Where the claim starts among the due rows, as a fraction of the way from the oldest to the newest (0 ≤ f < 1,
   * in `scheduled_at` and in `id`): 0 starts at the oldest, as an ordered claim. Default 0.
   */
  readonly start?: number;
  /** Rows larger than this answer their large columns outside (`sizedColumns`). Default: all inline. */
  readonly inlineBytes?: number;
  /** As `OutboxClaimParameters.deferBytes`. */
  readonly deferBytes?: number;
}

/**
 * The claim while no key is active: what `claimOutboxStatement` does when its walk finds no key (no reserve, no
 * keyed heads, due unkeyed rows), written without the walk, the reserve and the cursor. PostgreSQL plans it in
 * about a third of the time of the whole claim and runs it in about a quarter, which is most of the database's
 * work per row at a low rate.
 *
 * The store runs it as a named statement, and it is written so that PostgreSQL keeps one generic plan for it
 * (planned once per connection): the batch size is in the text (a `LIMIT $n` is estimated at a tenth of the table
 * in a generic plan, so PostgreSQL planned every execution again; that planning took about a third as long as the
 * execution, bench/README.md "Session 14"). One text per batch size, so a store's claims use one or two.
 *
 * It starts at the fraction `start` of the way between the oldest and the newest due row (two one-entry scans of
 * `outbox_due_unkeyed`), takes the rows from there on in (scheduled_at, id) order and fills what is left from the
 * oldest on (wrap-around): one locking pass, the rows from the start and then the rows before it, under one
 * `LIMIT`, so no row beyond the batch is locked. These are the rows an ordered claim would take when they all fit,
 * else other due rows. With `start` 0 the text has neither the two scans nor the wrap-around: it takes the oldest
 * due rows (`$3` stays bound, as 0). Unkeyed rows have no order (docs/design.md §5). Why: concurrent claimers that
 * all start at the oldest row each read the index entries of every row the others just took or hold (4.3 index
 * entries per claimed row with 4 claimers against 1.2 from a random start, and about 45% less database CPU per
 * row; bench/README.md "Session 7: store").
 *
 * The existence test over `outbox_active_key` is a one-time filter: when a keyed row is pending or processing, the
 * statement claims nothing and answers `any_key` true, so the caller runs the whole claim instead. Its snapshot is
 * the statement's, as the walk's would be. It reads the first entry in index order rather than `EXISTS`: in a
 * generic plan made while the table was small, `EXISTS` keeps a sequential scan of the whole table, the ordered
 * read keeps the index (as does the `claimed` join, see `claimedCte`; tests in `prepared.integration.test.ts`).
 * Rows come back ordered by id, each with `any_key`; when nothing was claimed one row of NULLs carries it.
 * Parameters: `$1` the lease in ms, `$2` the claim token, `$3` the start.
 */
export function claimUnkeyedOutboxStatement(schema: string, p: UnkeyedOutboxClaimParameters): Statement {
  const t = outboxTable(schema);
  const n = p.batchSize;
  if (!Number.isSafeInteger(n) || n < 1)
    throw new RangeError(`batchSize must be a positive integer, got ${n}`);
  const due = `o.state = 'pending' AND o.key IS NULL AND o.scheduled_at <= pg_catalog.now()`;
  const from = '((SELECT at FROM start), (SELECT id FROM start))';
  const start = p.start ?? 0;
  if (!(start >= 0 && start < 1)) throw new RangeError(`start must be in [0, 1), got ${start}`);
  const active = `active AS (
  SELECT (
    SELECT k.key FROM ${t} k WHERE k.state IN ('pending', 'processing') AND k.key IS NOT NULL
    ORDER BY k.key LIMIT 1
  ) IS NOT NULL AS any_key
)`;
  // Due unkeyed rows within `bound`, oldest first, locked as they are read (rows others hold are skipped).
  const locked = (bound: string) => `SELECT o.ctid FROM ${t} o
  WHERE ${due} AND ${bound}
  ORDER BY o.scheduled_at, o.id
  FOR UPDATE OF o SKIP LOCKED`;
  // The rows at `ctids` claimed, answered with `any_key` (one row of NULLs and it when nothing was claimed).
  const answer = (
    ctids: string,
  ) => `${claimedCte(t, { token: '$2', lease: '$1', ctids }, p.inlineBytes, p.deferBytes)}
SELECT claimed.*, active.any_key
FROM active LEFT JOIN claimed ON true ${CLAIM_COMMITS_ASYNCHRONOUSLY}
ORDER BY claimed.id::bigint`;
  const values = [p.leaseMs, p.claimToken, start];
  if (start === 0) {
    // From the oldest: no start to find and nothing to wrap around to (`$3` is still bound, as 0).
    return {
      text: `WITH ${active},
tail AS (
  ${locked('NOT (SELECT any_key FROM active) AND $3::float8 = 0')}
  LIMIT ${n}
),
${answer('SELECT ctid FROM tail')}`,
      values,
    };
  }
  // The rows from the start on, then (once they run out) the rows before it: an Append read lazily under the LIMIT.
  return {
    text: `WITH ${active},
start AS (
  SELECT lo.scheduled_at + $3::float8 * (hi.scheduled_at - lo.scheduled_at) AS at,
         lo.id + pg_catalog.floor($3::float8 * (hi.id - lo.id + 1))::bigint AS id
  FROM (SELECT o.scheduled_at, o.id FROM ${t} o WHERE ${due} ORDER BY o.scheduled_at, o.id LIMIT 1) lo,
       (SELECT o.scheduled_at, o.id FROM ${t} o WHERE ${due} ORDER BY o.scheduled_at DESC, o.id DESC LIMIT 1) hi
  WHERE NOT (SELECT any_key FROM active)
),
wrapped AS (
  SELECT tail.ctid FROM (
    ${locked(`(o.scheduled_at, o.id) >= ${from}`)}
  ) tail
  UNION ALL
  SELECT head.ctid FROM (
    ${locked(`(o.scheduled_at, o.id) < ${from}`)}
  ) head
  LIMIT ${n}
),
${answer('SELECT ctid FROM wrapped')}`,
    values,
  };
}

/**
 * Every how many light claims of one store instance one starts at the oldest due row; the others start at a
 * random point. Under a backlog a row therefore waits at most this many times the claims an ordered claim would
 * need to reach it (the head claims alone take the oldest rows), and on average about as many.
 */
export const HEAD_CLAIM_EVERY = 4;

/**
 * How often one claim runs its statement again when candidate heads were lost to concurrent claimers and the
 * batch is not full.
 */
const CONTENDED_RETRIES = 2;

/** Default most distinct keys one claim visits before it gives up for this call. */
export const DEFAULT_KEY_SCAN_LIMIT = 1000;

/** The extra columns of a claim's answer, on every row (one row of NULLs and these when nothing was claimed). */
interface ClaimAnswer {
  readonly next_key?: unknown;
  readonly contended?: unknown;
  readonly any_key?: unknown;
}

/** What {@link createOutboxClaim} needs. */
export interface OutboxClaimOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
  /** Most distinct keys one claim visits. Default 1000. */
  readonly keyScanLimit?: number;
  /** When the light claim runs as a named prepared statement. Default `createPreparedGuard()`. */
  readonly prepared?: PreparedGuard;
  /** Where a light claim that does not start at the oldest row starts (0 ≤ f < 1). Default `Math.random`. */
  readonly randomStart?: () => number;
}

/**
 * The outbox store's `claim`. Its state is where the next claim's key walk starts (the last key this instance
 * claimed or visited: it spreads claims over the keys and lets a claim get past a long run of blocked keys) and a
 * count of light claims (every `HEAD_CLAIM_EVERY`-th starts at the oldest due row, and so does one after a short
 * light claim, the others at a random point);
 * correctness never depends on either. A claim whose candidate heads were lost to concurrent claimers runs its
 * statement again (at most twice) with the same token; a claimed row that cannot be read goes dead alone.
 */
export function createOutboxClaim(
  options: OutboxClaimOptions,
): (claim: ClaimOptions) => Promise<OutboxRow[]> {
  const { executor, schema } = options;
  const keyScanLimit = Math.max(1, Math.floor(options.keyScanLimit ?? DEFAULT_KEY_SCAN_LIMIT));
  const limits = executor.resultLimits;
  let startAfterKey: string | null = null;
  let claims = 0;
  // Whether the latest statement saw a pending or processing keyed row. While none is seen, the claim is the light
  // statement, which claims unkeyed rows as the whole one would (from another start under a backlog); once it sees
  // one, the whole claim runs until its walk finds no key again. Per-key order never depends on it.
  let keysActive = false;
  // Both claims run named (parsed and planned once per connection: the light claim's planning took longer than its
  // execution, the whole claim's about a third of its execution), guarded against a generic plan gone bad.
  const prepared = options.prepared ?? createPreparedGuard();
  const randomStart = options.randomStart ?? Math.random;
  let lightClaims = 0;
  // Whether the latest light claim came back short: then every due row fitted in it, there is no backlog to spread
  // claimers over, and the next starts at the oldest (the cheaper statement).
  let lightShort = false;

  return async (claimOptions: ClaimOptions & DeferredPayloadClaimOptions) => {
    const { batchSize, leaseMs } = claimOptions;
    const deferOver = claimOptions.deferPayloadsOverBytes;
    const deferBytes =
      limits === undefined && deferOver !== undefined && Number.isSafeInteger(deferOver) && deferOver > 0
        ? { deferBytes: deferOver }
        : {};
    const n = Math.floor(batchSize);
    if (!(n > 0)) return [];
    // One token for the whole claim, also when a contended statement is run again.
    const claimToken = randomUUID();
    const claimed: OutboxRow[] = [];
    const unreadable: UnreadableClaim[] = [];
    const run = async ({ text, values }: Statement, named = false) => {
      const { rows } = named
        ? await prepared.query<RawRow & ClaimAnswer>(executor, text, values)
        : await executor.query<RawRow & ClaimAnswer>(text, values);
      const taken = rows.filter((row) => row.id !== null && row.id !== undefined);
      let read: ReturnType<typeof readClaimedRows<OutboxRow>>;
      try {
        await readOutsideColumns(executor, schema, 'outbox', taken, limits);
        read = readClaimedRows(taken, toOutboxRow, POSTGRES_READERS);
      } catch (error) {
        await releaseAnswered(executor, schema, 'outbox', taken);
        throw error;
      }
      // Payloads over `deferPayloadsOverBytes` were left out (pg / PGlite): the caller reads each when it needs it.
      markDeferredPayloads(taken, read.rows);
      claimed.push(...read.rows);
      unreadable.push(...read.unreadable);
      const first = rows[0];
      keysActive = first?.any_key === true;
      return first;
    };
    const inline = (places: number) =>
      limits === undefined ? {} : { inlineBytes: inlineBytesFor(limits, places) };
    if (!keysActive) {
      await run(
        claimUnkeyedOutboxStatement(schema, {
          batchSize: n,
          leaseMs,
          claimToken,
          start: lightClaims++ % HEAD_CLAIM_EVERY === 0 || lightShort ? 0 : randomStart(),
          ...inline(n),
          ...deferBytes,
        }),
        true,
      );
      lightShort = !keysActive && claimed.length + unreadable.length < n;
    }
    for (let round = 0; keysActive && round <= CONTENDED_RETRIES && claimed.length < n; round++) {
      const places = n - claimed.length;
      // Alternate ⌊n/2⌋ and ⌈n/2⌉ places for unkeyed rows, so at batch size 1 both kinds take turns.
      const unkeyedReserve = claims++ % 2 === 0 ? Math.floor(places / 2) : Math.ceil(places / 2);
      let first: ClaimAnswer | undefined;
      try {
        first = await run(
          claimOutboxStatement(schema, {
            batchSize: places,
            unkeyedReserve,
            leaseMs,
            startAfterKey,
            keyScanLimit,
            claimToken,
            ...inline(places),
            ...deferBytes,
          }),
          true,
        );
      } catch (error) {
        // The rows this claim's earlier statements took have committed under its token: answer them rather than
        // the error, which only the caller could settle them after; thrown, they waited for their lease (their
        // keys held, an attempt counted). The next claim meets the error again, and throws it.
        if (claimed.length + unreadable.length === 0) throw error;
        break;
      }
      if (first) startAfterKey = typeof first.next_key === 'string' ? first.next_key : null;
      // Heads lost to concurrent claimers were seen in a snapshot that is already old; a new statement sees
      // the heads behind them. Without contention a short answer means there is no more to claim.
      if (first?.contended !== true) break;
    }
    if (unreadable.length > 0) {
      // A row this reader cannot map goes dead alone; best effort, or its lease expires as after a crash.
      const dead = markOutboxDeadStatement(schema, unreadable);
      await executor.query(dead.text, dead.values).catch(() => undefined);
    }
    return claimed.sort((a, b) => compareIds(a.id, b.id));
  };
}
