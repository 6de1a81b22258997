/**
 * The admin statements (stats, list, requeue, replay, purge), one function each, mirrored in store-sqlserver's
 * admin-sql.ts. The schema name is validated and quoted by `quoteSchema`; every value is a parameter. Filters
 * that are absent leave their predicate out of the text (the text varies only by which constant predicates it
 * has), so each query uses the index that fits it.
 */
import { type RowId, STATE_LITERALS, type Table } from '@queuebox/core';
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
 * The WHERE predicates of `filter`, numbering parameters after `values` (which it extends). The literals of
 * `Failed`'s NOT IN come from core's constant table, never from input.
 */
function predicates(table: Table, filter: AdminFilter, values: unknown[]): string[] {
  const where: string[] = [];
  const param = (value: unknown, cast: string) => {
    values.push(value);
    return `$${values.length}::${cast}`;
  };
  if (filter.state === 'Failed') {
    const known = Object.values(STATE_LITERALS[table]).map((literal) => `'${literal}'`);
    where.push(`state NOT IN (${known.join(', ')})`);
  } else if (filter.state !== undefined) {
    where.push(`state = ${param(STATE_LITERALS[table][filter.state], 'text')}`);
  }
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
    (part) => `(SELECT min(m.scheduled_at) FROM (${part}) m)`,
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
    .map((part) => `(SELECT count(*) FROM (${part}) p)`)
    .join(' + ');
  return {
    text: `SELECT 'pending' AS state, (${pending})::bigint AS n
UNION ALL
SELECT 'processing', (SELECT count(*) FROM ${t} o WHERE o.state = 'processing')::bigint
UNION ALL
SELECT o.state, count(*)::bigint FROM ${t} o WHERE o.state NOT IN ('pending', 'processing') GROUP BY o.state`,
    values: [],
  };
}

/** Dead rows of `table`, read from `*_state_updated` (which holds the dead rows, not the pending ones). */
export function adminDeadCountStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT count(*)::bigint AS n FROM ${tableName(schema, table)} o WHERE o.state = 'dead'`,
    values: [],
  };
}

/** Milliseconds since the longest-waiting due pending row became due, by the database clock; NULL when none. */
export function adminOldestPendingStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT floor(extract(epoch FROM now() - ${minScheduledAt(schema, table, 'o.scheduled_at <= now()')}) * 1000)::float8 AS age_ms`,
    values: [],
  };
}

/**
 * The earliest scheduled_at of the pending rows scheduled after now (database clock); NULL when none. `sources`
 * (inbox only; null: every source) narrows it to those sources. Through the partial pending indexes (`pendingRows`).
 */
export function adminNextDueStatement(
  schema: string,
  table: Table,
  sources: readonly string[] | null,
): Statement {
  const bySource = table === 'inbox' && sources !== null;
  const rows = `o.scheduled_at > now()${bySource ? ' AND o.source = ANY ($1::text[])' : ''}`;
  return {
    text: `SELECT ${minScheduledAt(schema, table, rows)} AS next_due`,
    values: bySource ? [sources] : [],
  };
}

/** Dead rows per topic (outbox) or source (inbox), the largest groups first, at most `limit` groups. */
export function adminDeadGroupsStatement(schema: string, table: Table, limit: number): Statement {
  const column = table === 'outbox' ? 'topic' : 'source';
  return {
    text: `SELECT ${column} AS name, count(*)::bigint AS n FROM ${tableName(schema, table)}
WHERE state = 'dead'
GROUP BY ${column}
ORDER BY n DESC, name
LIMIT $1::int`,
    values: [limit],
  };
}

/** One page: rows after `afterId` (none: from the start) matching `filter`, ascending id, at most `limit`. */
export function adminListStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  afterId: RowId | null,
  limit: number,
  inlineBytes?: number,
): Statement {
  const values: unknown[] = [];
  const where = predicates(table, filter, values);
  if (afterId !== null) {
    values.push(afterId);
    where.push(`id > $${values.length}::bigint`);
  }
  values.push(limit);
  // Large columns outside for rows over `inlineBytes` (an executor with result limits, see large-columns.ts).
  const columns = sizedColumns(
    table === 'outbox' ? OUTBOX_COLUMNS : INBOX_COLUMNS,
    table,
    undefined,
    inlineBytes,
  );
  // `o.id`, not `id`: ORDER BY id would sort by the selected `id::text AS id`, as text (10 before 9).
  return {
    text: `SELECT ${columns} FROM ${tableName(schema, table)} o
${where.length > 0 ? `WHERE ${where.join(' AND ')}\n` : ''}ORDER BY o.id
LIMIT $${values.length}::int`,
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

/** The dead rows a requeue of `table` may take now: `filter`'s, and on the outbox only those whose key is idle. */
function requeueable(
  table: Table,
  filter: AdminFilter,
  values: unknown[],
  t: string,
  alias: string,
): string[] {
  const where = ["state = 'dead'", ...predicates(table, { ...filter, state: undefined }, values)];
  if (table === 'outbox') where.push(keyIdle(t, alias));
  return where;
}

/**
 * What a requeue would take: the first `limit` matching dead row ids, ascending, each with the count of every
 * matching dead row (window count, taken before the LIMIT). No row at all means none matches. Outbox rows whose
 * key has a row processing are left out (`adminKeysInFlightStatement` lists them).
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
    text: `SELECT o.id::text AS id, count(*) OVER ()::bigint AS total
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
 * Rows another requeue holds are skipped, not waited for. Outbox rows whose key has a row processing are left
 * dead, as the statement's snapshot sees them. The outbox requeue runs it in a transaction after
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
SET state = 'pending', attempt = 0, scheduled_at = now(), claim_token = NULL, lease_until = NULL,
    updated_at = now()
WHERE r.id = ANY (ARRAY(SELECT id FROM chosen)) AND r.state = 'dead'
RETURNING r.id::text AS id`,
    values,
  };
}

/**
 * The first `batchSize` outbox rows a requeue of `filter` may take (dead, key idle), ascending id, with their
 * keys, locked for the requeue's transaction; rows another transaction holds are skipped, not waited for.
 */
export function adminRequeueCandidatesStatement(
  schema: string,
  filter: AdminFilter,
  batchSize: number,
): Statement {
  const t = tableName(schema, 'outbox');
  const values: unknown[] = [];
  const where = requeueable('outbox', filter, values, t, 'o');
  values.push(batchSize);
  return {
    text: `SELECT o.id::text AS id, o.key
FROM ${t} o
WHERE ${where.join(' AND ')}
ORDER BY o.id
LIMIT $${values.length}::int
FOR UPDATE OF o SKIP LOCKED`,
    values,
  };
}

/**
 * Takes the per-key insert locks of `keys` without waiting: `pg_try_advisory_xact_lock` of the very lock an insert of
 * the key takes (`lockOutboxKeysStatement`: `hashtextextended(outboxKeyLockName(schema, key), 0)`), each distinct key
 * once, in ascending key order. Answers `key` for each lock obtained (they last until the transaction ends); a key
 * another transaction holds (an application's enqueue of it that has not committed, another requeue or a replay of
 * it) is left out, and the requeue leaves its rows dead (`key_busy`). Not waiting is the point: a requeue that waited
 * for one busy key would meanwhile hold up every writer of the keys it had already locked. A lock this transaction
 * holds already is obtained again (they stack).
 */
export function adminTryLockKeysStatement(schema: string, keys: readonly string[]): Statement {
  quoteSchema(schema);
  const ordered = [...new Set(keys)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    // The filter runs once per row of the unnest, in array order; a key whose lock is not granted is left out.
    text: `SELECT k.key FROM unnest($1::text[], $2::text[]) AS k(key, name)
WHERE pg_try_advisory_xact_lock(hashtextextended(k.name, 0))`,
    values: [ordered, ordered.map((key) => outboxKeyLockName(schema, key))],
  };
}

/**
 * Locks the head of each of `keys` — its smallest pending-or-processing id, `FOR UPDATE` — in key order, waiting
 * for a holder. Only the head: a claim takes a key's smallest pending-or-processing id when it is pending, and
 * nothing behind it, so the head is the one row of the key a claim can move while the requeue decides. A claim that
 * has locked the head and is moving it to processing commits first, so the requeue's next statement sees it
 * processing; a claim that reaches it while the requeue holds it skips it (its `SKIP LOCKED`). A processing head is
 * held as well, so a settle, retry or lease reclaim of it (processing → sent, dead or pending) waits for the
 * requeue to commit; one that came first commits first, and the lock is then taken on what it left: the same row
 * if it is still active (pending again), else the next active row of the key (the lock sits below the LIMIT, so a
 * row that fails the recheck is passed over). Run in the requeue's transaction after the keys' insert locks
 * (`adminTryLockKeysStatement`), which keep new rows of the keys out. Answers `locked`, the heads locked.
 *
 * A pending head is also written (a new version of the row, its values unchanged): a claim whose snapshot was taken
 * before the requeue committed sees the requeued row still dead and this head as its key's head, and reaches the
 * head only after the commit. Locking alone left the row as it was, so that claim locked it and took it while the
 * requeued row, pending again with the smaller id, was taken by the next claim: two rows of one key in flight, the
 * later one first. The claim finds a head by the `ctid` its snapshot read, and a row written since has another
 * `ctid`, so that claim now passes the head over.
 */
export function adminLockPendingKeyRowsStatement(schema: string, keys: readonly string[]): Statement {
  const ordered = [...new Set(keys)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const t = tableName(schema, 'outbox');
  return {
    text: `WITH heads AS (
  SELECT h.id, h.state
  FROM unnest($1::text[]) AS k(key)
  CROSS JOIN LATERAL (
    SELECT o.id, o.state FROM ${t} o
    WHERE o.key = k.key AND o.state IN ('pending', 'processing')
    ORDER BY o.id
    LIMIT 1
    FOR UPDATE OF o
  ) h
),
rewritten AS (
  UPDATE ${t} o SET updated_at = o.updated_at
  FROM heads WHERE o.id = heads.id AND heads.state = 'pending'
  RETURNING o.id
)
SELECT (SELECT count(*)::int FROM heads) AS locked, (SELECT count(*)::int FROM rewritten) AS rewritten`,
    values: [ordered],
  };
}

/**
 * The dead outbox rows of `filter` a requeue leaves dead because a row of their key is processing: the first
 * `limit`, ascending id, each with its key, the smallest processing id of that key, and the count of them all
 * (window count, taken before the LIMIT).
 */
export function adminKeysInFlightStatement(schema: string, filter: AdminFilter, limit: number): Statement {
  const t = tableName(schema, 'outbox');
  const values: unknown[] = [];
  const where = [
    "o.state = 'dead'",
    'o.key IS NOT NULL',
    ...predicates('outbox', { ...filter, state: undefined }, values),
  ];
  values.push(limit);
  return {
    text: `SELECT o.id::text AS id, o.key, f.processing_id::text AS processing_id, count(*) OVER ()::bigint AS total
FROM ${t} o
CROSS JOIN LATERAL (
  SELECT p.id AS processing_id FROM ${t} p WHERE p.key = o.key AND p.state = 'processing' ORDER BY p.id LIMIT 1
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
  WHERE state = $1::text AND updated_at < now() - $2::float8 * interval '1 millisecond'
  ORDER BY updated_at
  LIMIT $3::int
  FOR UPDATE SKIP LOCKED
)
DELETE FROM ${t} d
WHERE d.id = ANY (ARRAY(SELECT id FROM doomed)) AND d.state = $1::text`,
    values: [STATE_LITERALS[table][state], olderThanMs, batchSize],
  };
}
