/**
 * The admin statements (stats, list, requeue, replay, redact, purge), one function each, mirrored in store-sqlserver's
 * admin-sql.ts. The schema name is validated and quoted by `quoteSchema`; every value is a parameter, except the
 * state literals, which come from core's constant table (see `statePredicates`). Filters that are absent leave their
 * predicate out of the text (the text varies only by which constant predicates it has), so each query uses the
 * index that fits it.
 */
import { QueueBoxError, type RowId, STATE_LITERALS, type Table } from '@queuebox/core';
import type { AdminFilter } from '@queuebox/sql-store-common';
import type { Statement } from './executor.ts';
import { sizedColumns } from './large-columns.ts';
import { outboxKeyLockName } from './outbox-key-lock.ts';
import { INBOX_COLUMNS, OUTBOX_COLUMNS } from './rows.ts';
import { quoteSchema } from './schema-name.ts';

function tableName(schema: string, table: Table): string {
  return `${quoteSchema(schema)}.${table === 'outbox' ? 'outbox' : 'inbox'}`;
}

export type { AdminFilter } from '@queuebox/sql-store-common';

/**
 * The predicates of a state filter, with the state literals written into the text: a partial index serves a query
 * only when the planner can prove the index's predicate from the query's, and `state = $1` proves nothing in a
 * generic plan (a named statement's, or whatever plan a connection pooler or the Data API keeps), which leaves the
 * page to the primary key. The literals come from core's constant table, never from input; a state that is not in
 * it is refused. `Failed` (every literal this version does not know) is the NOT IN of the known ones, the predicate
 * of `<table>_unknown_state` (0008) as written there.
 */
function statePredicates(table: Table, state: AdminFilter['state']): string[] {
  if (state === undefined) return [];
  const literals = STATE_LITERALS[table];
  if (state === 'Failed') {
    const known = Object.values(literals).map((literal) => `'${literal}'`);
    return [`state NOT IN (${known.join(', ')})`];
  }
  if (!Object.hasOwn(literals, state)) {
    throw new QueueBoxError(`No ${table} state ${JSON.stringify(state)}`, { context: { table } });
  }
  return [`state = '${literals[state]}'`];
}

/** The WHERE predicates of `filter`, numbering parameters after `values` (which it extends). */
function predicates(table: Table, filter: AdminFilter, values: unknown[]): string[] {
  const where = statePredicates(table, filter.state);
  const param = (value: unknown, cast: string) => {
    values.push(value);
    return `$${values.length}::${cast}`;
  };
  if (table === 'outbox' && filter.topic !== undefined) where.push(`topic = ${param(filter.topic, 'text')}`);
  if (table === 'inbox' && filter.source !== undefined)
    where.push(`source = ${param(filter.source, 'text')}`);
  if (filter.ids !== undefined) where.push(`id = ANY (${param(filter.ids, 'bigint[]')})`);
  return where;
}

/**
 * Reads of the pending rows go through the partial indexes, never the table: the outbox's due pending rows are
 * `outbox_due_unkeyed` (no key) and `outbox_active_key` (keyed, pending or processing), the inbox's `inbox_due`. A
 * plain `WHERE state = 'pending'` on the outbox matched neither and was planned as a (parallel) scan of every row,
 * sent ones included: 170 ms at a million rows, seconds at several, at every tick that samples the gauges
 * (bench/README.md, session 15). `rows` is the condition on `scheduled_at` (with `o` as the alias).
 */
function pendingRows(schema: string, table: Table, rows: string): string[] {
  const t = tableName(schema, table);
  if (table === 'inbox') return [`SELECT o.scheduled_at FROM ${t} o WHERE o.state = 'pending' AND ${rows}`];
  return [
    `SELECT o.scheduled_at FROM ${t} o WHERE o.state = 'pending' AND o.key IS NULL AND ${rows}`,
    `SELECT o.scheduled_at FROM ${t} o
  WHERE o.state IN ('pending', 'processing') AND o.key IS NOT NULL AND o.state = 'pending' AND ${rows}`,
  ];
}

/** The smallest `scheduled_at` of the pending rows of `table` that meet `rows` (see `pendingRows`). */
function minScheduledAt(schema: string, table: Table, rows: string): string {
  const parts = pendingRows(schema, table, rows).map(
    (part) => `(SELECT pg_catalog.min(m.scheduled_at) FROM (${part}) m)`,
  );
  return parts.length === 1 ? (parts[0] as string) : `least(${parts.join(',\n  ')})`;
}

/**
 * Row counts per stored state literal (unknown literals included, as they are), each state from its partial index:
 * pending (see `pendingRows`), processing (`*_lease`), and the rest, grouped, from `*_state_updated` (0004), which
 * holds every row that is neither pending nor processing; none reads the table's other rows.
 */
export function adminStateCountsStatement(schema: string, table: Table): Statement {
  const t = tableName(schema, table);
  const pending = pendingRows(schema, table, 'true')
    .map((part) => `(SELECT pg_catalog.count(*) FROM (${part}) p)`)
    .join(' + ');
  return {
    text: `SELECT 'pending' AS state, (${pending})::bigint AS n
UNION ALL
SELECT 'processing', (SELECT pg_catalog.count(*) FROM ${t} o WHERE o.state = 'processing')::bigint
UNION ALL
SELECT o.state, pg_catalog.count(*)::bigint FROM ${t} o WHERE o.state NOT IN ('pending', 'processing') GROUP BY o.state`,
    values: [],
  };
}

/**
 * The gauges' counts of `table` (`AdminStore.gauges`), one row, each from the partial index that holds its rows:
 * pending (`pendingRows`), processing (`*_lease`), dead (`*_dead`), unknown literals (`*_unknown_state`, its
 * predicate as written there); and `rows_estimate`, the table's rows as the planner estimates them: `reltuples` of
 * the last VACUUM or ANALYZE scaled by how the table's pages grew since. No finished row is read then: the exact
 * `stats()` counted them through `*_state_updated`, a parallel scan of 15M rows every 15 s in the local runtime (an
 * outside audit). A table with pages whose statistics give no density is counted instead: never vacuumed nor
 * analysed (`reltuples` -1), or without a live row at its last VACUUM (0 rows, or 0 pages, to scale by). On a server
 * autovacuum soon analyses a table that grows; PGlite has no autovacuum, and its estimate was missing until the first
 * purge and 0 after one that emptied the table, whatever came next (review of 904252b).
 */
export function adminGaugeCountsStatement(schema: string, table: Table): Statement {
  const t = tableName(schema, table);
  const pending = pendingRows(schema, table, 'true')
    .map((part) => `(SELECT pg_catalog.count(*) FROM (${part}) p)`)
    .join(' + ');
  const [unknown] = statePredicates(table, 'Failed');
  return {
    text: `SELECT (${pending})::bigint AS pending,
  (SELECT pg_catalog.count(*) FROM ${t} o WHERE o.state = 'processing')::bigint AS processing,
  (SELECT pg_catalog.count(*) FROM ${t} o WHERE o.state = 'dead')::bigint AS dead,
  (SELECT pg_catalog.count(*) FROM ${t} o WHERE o.${unknown})::bigint AS unknown,
  (SELECT CASE
     WHEN pg_catalog.pg_relation_size(c.oid) = 0 THEN 0
     WHEN c.relpages > 0 AND c.reltuples > 0 THEN c.reltuples / c.relpages
       * (pg_catalog.pg_relation_size(c.oid) / pg_catalog.current_setting('block_size')::float8)
     ELSE (SELECT pg_catalog.count(*) FROM ${t} o)
   END
   FROM pg_catalog.pg_class c WHERE c.oid = '${t}'::regclass)::float8 AS rows_estimate`,
    values: [],
  };
}

/** Dead rows of `table`, read from `*_state_updated` (which holds the dead rows, not the pending ones). */
export function adminDeadCountStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT pg_catalog.count(*)::bigint AS n FROM ${tableName(schema, table)} o WHERE o.state = 'dead'`,
    values: [],
  };
}

/** Milliseconds since the longest-waiting due pending row became due, by the database clock; NULL when none. */
export function adminOldestPendingStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT pg_catalog.floor(extract(epoch FROM pg_catalog.now() - ${minScheduledAt(schema, table, 'o.scheduled_at <= pg_catalog.now()')}) * 1000)::float8 AS age_ms`,
    values: [],
  };
}

/**
 * The earliest scheduled_at of the pending rows scheduled after now (database clock); NULL when none. `sources`
 * (inbox only; null: every source) narrows it to those sources. Through the partial pending indexes (`pendingRows`).
 */
/** The last instant a JavaScript Date holds (8.64e15 ms after the epoch). */
const LAST_JS_TIMESTAMP = '275760-09-13 00:00:00+00';

export function adminNextDueStatement(
  schema: string,
  table: Table,
  sources: readonly string[] | null,
): Statement {
  const bySource = table === 'inbox' && sources !== null;
  // A row parked at 'infinity' (or past what a JavaScript Date holds) by plain SQL is never due: no tick waits for it.
  const rows = `o.scheduled_at > pg_catalog.now() AND o.scheduled_at < '${LAST_JS_TIMESTAMP}'::timestamptz${bySource ? ' AND o.source = ANY ($1::text[])' : ''}`;
  return {
    text: `SELECT ${minScheduledAt(schema, table, rows)} AS next_due, pg_catalog.now() AS db_now`,
    values: bySource ? [sources] : [],
  };
}

/** Dead rows per topic (outbox) or source (inbox), the largest groups first, at most `limit` groups. */
export function adminDeadGroupsStatement(schema: string, table: Table, limit: number): Statement {
  const column = table === 'outbox' ? 'topic' : 'source';
  return {
    text: `SELECT ${column} AS name, pg_catalog.count(*)::bigint AS n FROM ${tableName(schema, table)}
WHERE state = 'dead'
GROUP BY ${column}
ORDER BY n DESC, name
LIMIT $1::int`,
    values: [limit],
  };
}

/**
 * Rows of the primary key that a page of pending rows walks from its cursor, per row of the page, before it reads
 * the pending rows' ids from the claims' indexes instead (`pendingPageText`): the walk fills the page wherever at
 * least one row in 50 after the cursor is pending, and reads at most 50 rows per row of the page.
 */
export const PENDING_WALK_ROWS_PER_ROW = 50;

/**
 * The ids that hold the first `limit` pending rows after the cursor (`after`), read from the claims' partial
 * indexes, each ordered by `id + 0`: ordered by `id`, the planner would walk the primary key for the LIMIT, pricing
 * the pending rows as spread evenly along it while they sit behind the sent ones. The inbox's are `inbox_due`'s first
 * `limit`. The outbox's are `outbox_due_unkeyed`'s first `limit` (no key) and `outbox_active_key`'s (keyed, pending
 * or processing) first `limit` plus as many as there are processing rows (`outbox_lease`), which then holds its first
 * `limit` pending ones. Each reads only the index (the ids are in it, and its predicate is the query's; the outbox's
 * read the table too for a topic filter) wherever the visibility map lets it, and sorts the ids after the cursor,
 * keeping the smallest. `where` is the filter's predicates, `others` those without the state's.
 */
function pendingIdsText(
  t: string,
  table: Table,
  where: readonly string[],
  others: readonly string[],
  after: string | undefined,
  limit: string,
): string {
  const arm = (conditions: readonly string[], take: string) =>
    `(SELECT o.id FROM ${t} o WHERE ${[...conditions, ...(after === undefined ? [] : [after])].join(' AND ')}
    ORDER BY o.id + 0 LIMIT ${take})`;
  if (table === 'inbox') return arm(where, limit);
  return `${arm([...where, 'o.key IS NULL'], limit)}
    UNION ALL
    ${arm(
      [...others, "o.state IN ('pending', 'processing')", 'o.key IS NOT NULL'],
      `${limit} + (SELECT pg_catalog.count(*) FROM ${t} p WHERE p.state = 'processing')`,
    )}`;
}

/**
 * The page of pending rows (`adminListStatement`), without an index that holds them in id order: one would be one
 * more index entry for every row stored, retried or requeued (about 11% fewer rows per second inserted into the outbox,
 * pgbench), for an operator's list page. Two reads, the second only when the first did not fill the page:
 * 1. `walked`: the primary key from the cursor on, at most `PENDING_WALK_ROWS_PER_ROW` rows per row of the page, and
 *    of those the first `limit` that match. The page is this when it found `limit`: they are then the first matching
 *    rows after the cursor. This is the page inside a backlog, where most rows are pending (a few buffers).
 * 2. Otherwise the ids of `pendingIdsText`, and the first `limit` of their rows that match, by primary key in id
 *    order. This reads the entries of the claims' indexes (O(pending rows), not O(rows)): behind 1,960,000 sent rows,
 *    28,000 pending, 352 buffers where the walk of the primary key read 31,493 (0.45-0.9 s); at 498,000 pending rows
 *    2,750. It reads the table for an entry whose page the visibility map does not mark all-visible (a backlog that
 *    VACUUM has not reached yet), and the planner, pricing that, may read the rows after the cursor instead.
 * The second read's LIMIT is 0 when the first filled the page, and a LIMIT of 0 reads nothing below it (no parallel
 * worker starts either). `where` is the filter's predicates, `others` those without the state's, `after` the
 * cursor's; the columns are selected from `page` (alias `o`).
 */
function pendingPageText(
  t: string,
  table: Table,
  columns: string,
  where: readonly string[],
  others: readonly string[],
  after: string | undefined,
  limit: string,
): string {
  const walk = `SELECT * FROM ${t} o${after === undefined ? '' : ` WHERE ${after}`} ORDER BY o.id LIMIT ${limit} * ${PENDING_WALK_ROWS_PER_ROW}`;
  return `WITH walked AS MATERIALIZED (
  SELECT o.* FROM (${walk}) o
  WHERE ${where.join(' AND ')}
  ORDER BY o.id
  LIMIT ${limit}
), page AS (
  SELECT * FROM walked WHERE (SELECT pg_catalog.count(*) FROM walked) = ${limit}
  UNION ALL
  (SELECT o.* FROM ${t} o
  WHERE ${where.join(' AND ')} AND o.id = ANY (ARRAY(
    ${pendingIdsText(t, table, where, others, after, limit)}))
  ORDER BY o.id
  LIMIT CASE WHEN (SELECT pg_catalog.count(*) FROM walked) < ${limit} THEN ${limit} ELSE 0 END)
)
SELECT ${columns} FROM page o
ORDER BY o.id
LIMIT ${limit}`;
}

/**
 * One page: rows after `afterId` (none: from the start) matching `filter`, ascending id, at most `limit`. A page of
 * one state reads that state's rows only, never the primary key past the rows of the other states (a page of pending
 * rows behind 1,960,000 sent ones read 39,355 buffers that way): dead ones from `<table>_dead` (0007) and unknown
 * literals from `<table>_unknown_state` (0008), each in id order, so a page is the next `limit` entries after the
 * cursor; processing rows, which are few (the claims' batches in flight), from `<table>_lease`, then sorted; pending
 * rows as `pendingPageText` says. Sent rows, most of the table, are read along the primary key.
 */
export function adminListStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  afterId: RowId | null,
  limit: number,
  inlineBytes?: number,
): Statement {
  const values: unknown[] = [];
  const others = predicates(table, { ...filter, state: undefined }, values);
  const where = [...statePredicates(table, filter.state), ...others];
  let after: string | undefined;
  if (afterId !== null) {
    values.push(afterId);
    after = `id > $${values.length}::bigint`;
  }
  values.push(limit);
  const limitParam = `$${values.length}::int`;
  // Large columns outside for rows over `inlineBytes` (an executor with result limits, see large-columns.ts).
  const columns = sizedColumns(
    table === 'outbox' ? OUTBOX_COLUMNS : INBOX_COLUMNS,
    table,
    undefined,
    inlineBytes,
  );
  const t = tableName(schema, table);
  if (filter.state === 'Pending') {
    return { text: pendingPageText(t, table, columns, where, others, after, limitParam), values };
  }
  if (after !== undefined) where.push(after);
  // `o.id`, not `id`: ORDER BY id would sort by the selected `id::text AS id`, as text (10 before 9).
  return {
    text: `SELECT ${columns} FROM ${t} o
${where.length > 0 ? `WHERE ${where.join(' AND ')}\n` : ''}ORDER BY o.id
LIMIT ${limitParam}`,
    values,
  };
}

/**
 * Outbox only: the row at `alias` has no key, or no row of its key is processing. A claim takes a key's smallest
 * pending-or-processing id when it is pending, so a dead row requeued behind a row of its key in delivery would be
 * claimed while that row is still out: two rows of one key in flight. Such rows stay dead until the key settles.
 * It reads processing rows only, through an index (`outbox_active_key` by key, or `outbox_lease` all at once, as
 * the planner likes), and those are few.
 */
function keyIdle(t: string, alias: string): string {
  return `(${alias}.key IS NULL OR NOT EXISTS (SELECT 1 FROM ${t} p WHERE p.key = ${alias}.key AND p.state = 'processing'))`;
}

/**
 * Inbox only: the row at `alias` has no aggregate id, or no row of its source and aggregate id is processing. The
 * relay forwards the rows of one source and aggregate id in id order (docs/design.md §5) and its claim takes the
 * oldest active row of an id when it is pending, so a dead row requeued while a later row of its id is with the relay
 * (or a pull worker) would be forwarded after it. Such rows stay dead until the id settles. It reads processing rows
 * of one id through `inbox_active_aggregate`.
 */
function aggregateIdle(t: string, alias: string): string {
  return `(${alias}.aggregate_id IS NULL OR NOT EXISTS (SELECT 1 FROM ${t} p WHERE p.source = ${alias}.source AND p.aggregate_id = ${alias}.aggregate_id AND p.state = 'processing'))`;
}

/**
 * The dead rows a requeue of `table` may take now: `filter`'s whose key (outbox) or source and aggregate id (inbox)
 * has no row processing.
 */
function requeueable(
  table: Table,
  filter: AdminFilter,
  values: unknown[],
  t: string,
  alias: string,
): string[] {
  const where = ["state = 'dead'", ...predicates(table, { ...filter, state: undefined }, values)];
  where.push(table === 'outbox' ? keyIdle(t, alias) : aggregateIdle(t, alias));
  return where;
}

/**
 * What a requeue would take: the first `limit` matching dead row ids, ascending, each with the count of every
 * matching dead row (window count, taken before the LIMIT). No row at all means none matches. Rows whose key
 * (outbox) or source and aggregate id (inbox) has a row processing are left out (`adminKeysInFlightStatement` lists
 * them).
 */
export function adminRequeuePreviewStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  limit: number,
): Statement {
  const t = tableName(schema, table);
  const values: unknown[] = [];
  const where = requeueable(table, filter, values, t, 'o');
  values.push(limit);
  return {
    text: `SELECT o.id::text AS id, pg_catalog.count(*) OVER ()::bigint AS total
FROM ${t} o
WHERE ${where.join(' AND ')}
ORDER BY o.id
LIMIT $${values.length}::int`,
    values,
  };
}

/**
 * dead → pending for the first `batchSize` matching dead rows in id order: attempt 0, due now, claim cleared.
 * last_error is left as it is: the error of the row's last failed attempt, history until another attempt fails.
 * Rows another requeue holds are skipped, not waited for. Rows whose key (outbox) or source and aggregate id
 * (inbox) has a row processing are left dead, as the statement's snapshot sees them. The outbox requeue runs it in a transaction after
 * `adminRequeueCandidatesStatement`, `adminTryLockKeysStatement` and `adminLockPendingKeyRowsStatement`, on the
 * candidates whose key lock it obtained (sql-store-common's `createSqlAdminStore`); alone it is the inbox's requeue.
 */
export function adminRequeueStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  batchSize: number,
): Statement {
  const t = tableName(schema, table);
  const values: unknown[] = [];
  const where = requeueable(table, filter, values, t, 'o');
  values.push(batchSize);
  return {
    text: `WITH chosen AS (
  SELECT o.id FROM ${t} o
  WHERE ${where.join(' AND ')}
  ORDER BY o.id
  LIMIT $${values.length}::int
  FOR UPDATE OF o SKIP LOCKED
)
UPDATE ${t} r
SET state = 'pending', attempt = 0, scheduled_at = pg_catalog.now(), claim_token = NULL, lease_until = NULL,
    updated_at = pg_catalog.now()
WHERE r.id = ANY (ARRAY(SELECT id FROM chosen)) AND r.state = 'dead'
RETURNING r.id::text AS id`,
    values,
  };
}

/**
 * Most dead rows of the selection, in id order from its first requeueable one, that a batch reads for the other dead
 * rows of its keys (`adminRequeueCandidatesStatement`). No index holds the dead rows by key, so the batch reads them
 * in id order through `outbox_dead`: a bounded read per batch (a batch of 500 among 300,000 dead rows of as many
 * keys, about 30 ms), where reading every dead row of the selection would make a requeue of N dead rows read
 * O(N²/batch size) of them.
 */
export const REQUEUE_KEY_SCAN_ROWS = 100_000;

/**
 * The outbox rows one requeue batch takes, whole keys (`AdminStatements.adminRequeueCandidatesStatement`): the first
 * `batchSize` dead rows of `filter` whose key is idle, ascending id, and every other dead row of their keys among the
 * next {@link REQUEUE_KEY_SCAN_ROWS} dead rows of the selection, at most `maxRows` rows in all. Keys go in the order
 * of their first row, and the last keys that would pass `maxRows` are left for the next batch (they stay dead, first
 * in its order), except the first key, which alone may fill the batch with its first `maxRows` rows. A batch that took
 * only part of a key's dead rows left the rest to a later batch, which finds the key in flight (the part it requeued
 * being delivered) and leaves them dead while rows the application writes meanwhile go first (an outside audit). The
 * rows are locked for the requeue's transaction; rows another transaction holds are skipped, not waited for. Answers
 * `id`, `key` and `taken`, how many of the first `batchSize` were found (the batch is full when it is `batchSize`).
 */
export function adminRequeueCandidatesStatement(
  schema: string,
  filter: AdminFilter,
  batchSize: number,
  maxRows: number = batchSize,
): Statement {
  const t = tableName(schema, 'outbox');
  const values: unknown[] = [];
  const where = requeueable('outbox', filter, values, t, 'o');
  // The keys' other dead rows: the key check is the first rows' (their keys are idle); the update checks it again.
  const dead = ["state = 'dead'", ...predicates('outbox', { ...filter, state: undefined }, values)];
  values.push(batchSize);
  const first = `$${values.length}::int`;
  values.push(Math.max(batchSize, maxRows));
  const most = `$${values.length}::int`;
  return {
    text: `WITH firsts AS MATERIALIZED (
  SELECT o.id, o.key FROM ${t} o
  WHERE ${where.join(' AND ')}
  ORDER BY o.id
  LIMIT ${first}
),
ahead AS MATERIALIZED (
  SELECT o.id, o.key FROM ${t} o
  WHERE ${dead.join(' AND ')} AND o.key IS NOT NULL AND o.id >= (SELECT pg_catalog.min(f.id) FROM firsts f)
  ORDER BY o.id
  LIMIT ${REQUEUE_KEY_SCAN_ROWS}
),
leads AS (
  SELECT f.key, pg_catalog.min(f.id) AS lead FROM firsts f WHERE f.key IS NOT NULL GROUP BY f.key
),
whole AS (
  SELECT f.id, f.id AS lead FROM firsts f WHERE f.key IS NULL
  UNION
  SELECT a.id, l.lead FROM ahead a JOIN leads l ON l.key = a.key
  UNION
  SELECT f.id, l.lead FROM firsts f JOIN leads l ON l.key = f.key
),
ranked AS (
  SELECT w.id, w.lead,
    pg_catalog.count(*) OVER (ORDER BY w.lead) AS through_key,
    pg_catalog.row_number() OVER (PARTITION BY w.lead ORDER BY w.id) AS nth,
    pg_catalog.min(w.lead) OVER () AS first_lead
  FROM whole w
)
SELECT o.id::text AS id, o.key, (SELECT pg_catalog.count(*) FROM firsts)::int AS taken
FROM ${t} o
WHERE o.id = ANY (ARRAY(
    SELECT r.id FROM ranked r WHERE r.through_key <= ${most} OR (r.lead = r.first_lead AND r.nth <= ${most})))
  AND o.state = 'dead'
ORDER BY o.id
FOR UPDATE OF o SKIP LOCKED`,
    values,
  };
}

/**
 * Takes the per-key insert locks of `keys` without waiting: `pg_try_advisory_xact_lock` of the very lock an insert of
 * the key takes (`lockOutboxKeysStatement`: `hashtextextended(outboxKeyLockName(schema, key), 0::bigint)`), each
 * distinct key once, in ascending key order. Answers `key` for each lock obtained (they last until the transaction
 * ends); a key another transaction holds (an application's enqueue of it that has not committed, another requeue or a replay of
 * it) is left out, and the requeue leaves its rows dead (`key_busy`). Not waiting is the point: a requeue that waited
 * for one busy key would meanwhile hold up every writer of the keys it had already locked. A lock this transaction
 * holds already is obtained again (they stack).
 */
export function adminTryLockKeysStatement(schema: string, keys: readonly string[]): Statement {
  quoteSchema(schema);
  const ordered = [...new Set(keys)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    // The filter runs once per row of the unnest, in array order; a key whose lock is not granted is left out.
    text: `SELECT k.key FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS k(key, name)
WHERE pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended(k.name, 0::bigint))`,
    values: [ordered, ordered.map((key) => outboxKeyLockName(schema, key))],
  };
}

/**
 * Locks the head of each of `keys` — its smallest pending-or-processing id — without waiting, in id order. Only the
 * head: a claim takes a key's smallest pending-or-processing id when it is pending, and nothing behind it, so the
 * head is the one row of the key a claim can move while the requeue decides. A claim that reaches a head the requeue
 * holds skips it (its `SKIP LOCKED`); a settle, retry or lease reclaim of a processing head waits for the requeue to
 * commit. Each head is found first as the statement's snapshot sees it, then locked `FOR UPDATE SKIP LOCKED` with its
 * state checked again on the locked row: a head another transaction holds (a claim moving it to processing, a settle
 * or reclaim of it at that moment) or that changed since is not locked, and its key is answered as `held_key`, one
 * row per such key: the requeue leaves that key's dead rows dead (`key_busy`), and a later batch takes them. Waiting
 * instead, in key order, deadlocked with the runtime's settles, which lock the rows of a claim batch in their own
 * order while the requeue held one head and waited for another (about 10 of 33 bulk requeues of 20,000 rows, an
 * outside audit); a requeue that waits for no lock is in no deadlock. A key without an active row has no head and
 * is not held (its insert lock keeps new rows out). Run in the requeue's transaction after the keys' insert locks
 * (`adminTryLockKeysStatement`).
 *
 * A pending head is also written (a new version of the row, its values unchanged): a claim whose snapshot was taken
 * before the requeue committed sees the requeued row still dead and this head as its key's head, and reaches the
 * head only after the commit. Locking alone left the row as it was, so that claim locked it and took it while the
 * requeued row, pending again with the smaller id, was taken by the next claim: two rows of one key in flight, the
 * later one first. The claim finds a head by the `ctid` its snapshot read, and a row written since has another
 * `ctid`, so that claim now passes the head over. (A data-modifying WITH runs whether or not the answer reads it.)
 */
export function adminLockPendingKeyRowsStatement(schema: string, keys: readonly string[]): Statement {
  const t = tableName(schema, 'outbox');
  return {
    text: `WITH heads AS MATERIALIZED (
  SELECT k.key, h.id
  FROM (SELECT DISTINCT u.key FROM pg_catalog.unnest($1::text[]) AS u(key)) k
  CROSS JOIN LATERAL (
    SELECT o.id FROM ${t} o
    WHERE o.key = k.key AND o.state IN ('pending', 'processing')
    ORDER BY o.id
    LIMIT 1
  ) h
),
locked AS MATERIALIZED (
  SELECT o.id, o.state FROM ${t} o
  WHERE o.id = ANY (ARRAY(SELECT heads.id FROM heads)) AND o.state IN ('pending', 'processing')
  ORDER BY o.id
  FOR UPDATE OF o SKIP LOCKED
),
rewritten AS (
  UPDATE ${t} o SET updated_at = o.updated_at
  FROM locked WHERE o.id = locked.id AND locked.state = 'pending'
  RETURNING o.id
)
SELECT h.key AS held_key FROM heads h
WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = h.id)`,
    values: [[...new Set(keys)]],
  };
}

/**
 * The dead rows of `filter` a requeue leaves dead because a row of their key (outbox) or of their source and
 * aggregate id (inbox) is processing: the first `limit`, ascending id, each with that key or aggregate id (as
 * `key`), the smallest processing id of it, and the count of them all (window count, taken before the LIMIT).
 */
export function adminKeysInFlightStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  limit: number,
): Statement {
  const t = tableName(schema, table);
  const values: unknown[] = [];
  const key = table === 'outbox' ? 'key' : 'aggregate_id';
  const same =
    table === 'outbox' ? 'p.key = o.key' : 'p.source = o.source AND p.aggregate_id = o.aggregate_id';
  const where = [
    "o.state = 'dead'",
    `o.${key} IS NOT NULL`,
    ...predicates(table, { ...filter, state: undefined }, values),
  ];
  values.push(limit);
  return {
    text: `SELECT o.id::text AS id, o.${key} AS key, f.processing_id::text AS processing_id, pg_catalog.count(*) OVER ()::bigint AS total
FROM ${t} o
CROSS JOIN LATERAL (
  SELECT p.id AS processing_id FROM ${t} p WHERE ${same} AND p.state = 'processing' ORDER BY p.id LIMIT 1
) f
WHERE ${where.join(' AND ')}
ORDER BY o.id
LIMIT $${values.length}::int`,
    values,
  };
}

/** A new pending outbox row copied from sent row `id` (topic, key, payload, headers, max_attempts). */
export function adminReplayStatement(schema: string, id: RowId): Statement {
  const t = tableName(schema, 'outbox');
  return {
    text: `INSERT INTO ${t} (topic, key, payload, headers, max_attempts)
SELECT topic, key, payload, headers, max_attempts FROM ${t}
WHERE id = $1::bigint AND state = 'sent'
RETURNING id::text AS id`,
    values: [id],
  };
}

/**
 * The columns a redact clears, per table: the message data a sender or the application chose. The inbox's
 * aggregate_id and correlation_id (both NULL-able) may hold a customer id, and no read of a final row needs them.
 */
const REDACTED_COLUMNS: Readonly<Record<Table, string>> = {
  outbox: `payload = 'null'::jsonb, headers = '{}'::jsonb, last_error = NULL`,
  inbox: `payload = 'null'::jsonb, headers = '{}'::jsonb, last_error = NULL, aggregate_id = NULL, correlation_id = NULL`,
};

/**
 * Erases the message data of row `id` when it is final (outbox sent or dead, inbox processed or dead): see
 * `REDACTED_COLUMNS`. The state is checked on the row the UPDATE changes, so a row that is being delivered is never
 * touched; updated_at is left as it is, so retention deletes the row when it would have. Answers the id when it
 * changed the row, nothing otherwise (`adminRowStateStatement` then tells why).
 */
export function adminRedactStatement(schema: string, table: Table, id: RowId): Statement {
  const literals = STATE_LITERALS[table];
  return {
    text: `UPDATE ${tableName(schema, table)}
SET ${REDACTED_COLUMNS[table]}
WHERE id = $1::bigint AND state IN ('${literals.Sent}', '${literals.Dead}')
RETURNING id::text AS id`,
    values: [id],
  };
}

/** The stored state literal of row `id` of `table` (no row when there is none). */
export function adminRowStateStatement(schema: string, table: Table, id: RowId): Statement {
  return {
    text: `SELECT state FROM ${tableName(schema, table)} WHERE id = $1::bigint`,
    values: [id],
  };
}

/**
 * Deletes up to `batchSize` rows in state `state` (a known literal) whose updated_at is older than
 * `olderThanMs`, oldest first (index `<table>_state_updated`). Rows another purge holds are skipped.
 */
export function adminPurgeStatement(
  schema: string,
  table: Table,
  state: 'Sent' | 'Dead',
  olderThanMs: number,
  batchSize: number,
): Statement {
  const t = tableName(schema, table);
  return {
    text: `WITH doomed AS (
  SELECT id FROM ${t}
  WHERE state = $1::text AND updated_at < pg_catalog.now() - $2::float8 * interval '1 millisecond'
  ORDER BY updated_at
  LIMIT $3::int
  FOR UPDATE SKIP LOCKED
)
DELETE FROM ${t} d
WHERE d.id = ANY (ARRAY(SELECT id FROM doomed)) AND d.state = $1::text`,
    values: [STATE_LITERALS[table][state], olderThanMs, batchSize],
  };
}

/**
 * How many rows `adminPurgeStatement` with the same `state` and `olderThanMs` would delete, all batches together: a
 * purge's dry run (`queuebox purge --dry-run`). A count over the index `<table>_state_updated`, as the purge reads it;
 * it deletes and locks nothing.
 */
export function adminPurgeCountStatement(
  schema: string,
  table: Table,
  state: 'Sent' | 'Dead',
  olderThanMs: number,
): Statement {
  return {
    text: `SELECT pg_catalog.count(*)::bigint AS n FROM ${tableName(schema, table)}
WHERE state = $1::text AND updated_at < pg_catalog.now() - $2::float8 * interval '1 millisecond'`,
    values: [STATE_LITERALS[table][state], olderThanMs],
  };
}

/**
 * A plain VACUUM of `table` (not FULL: no exclusive lock, no rewrite; the space of deleted rows is marked free for
 * new rows), with ANALYZE (the planner's and the gauges' statistics: `adminGaugeCountsStatement`). Runs outside a
 * transaction. For PGlite only, where no autovacuum runs (`AdminStore.vacuum`).
 */
export function adminVacuumStatement(schema: string, table: Table): Statement {
  return { text: `VACUUM (ANALYZE) ${tableName(schema, table)}`, values: [] };
}
