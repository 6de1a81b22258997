/**
 * The admin statements (stats, list, requeue, replay, redact, purge), one function each, mirroring store-postgres's
 * admin-sql.ts. The schema name is validated and quoted by `quoteSchema`; every value is a parameter, except the
 * state literals, which come from core's constant table (see `statePredicates`). Filters that are absent leave
 * their predicate out of the text. As in outbox-sql.ts, an OUTPUT clause sits alone on its line; where PostgreSQL
 * locks with FOR UPDATE SKIP LOCKED, these read with UPDLOCK, READPAST, ROWLOCK.
 */
import { QueueBoxError, type RowId, STATE_LITERALS, StoreError, type Table } from '@queuebox/core';
import type { AdminFilter } from '@queuebox/sql-store-common';
import mssql from 'mssql';
import type { SqlParam, Statement } from './executor.ts';
import { sameAggregate } from './inbox-claim.ts';
import { outboxKeyLockResource } from './outbox-key-lock.ts';
import {
  BINARY,
  clampDelayMs,
  jsonParam,
  LOCKS_PER_BATCH,
  statementRows,
  TAKE,
  TAKE_BEGIN,
  TAKE_END,
  UTC_NOW,
  utcNowPlus,
} from './outbox-sql.ts';
import { INBOX_COLUMNS, OUTBOX_COLUMNS } from './rows.ts';
import { quoteSchema } from './schema-name.ts';

function tableName(schema: string, table: Table): string {
  return `${quoteSchema(schema)}.${table === 'outbox' ? '[outbox]' : '[inbox]'}`;
}

export type { AdminFilter } from '@queuebox/sql-store-common';

/** Text compared with an NVARCHAR column: sent as NVARCHAR(MAX) so nothing is cut short before comparing. */
function text(value: string): SqlParam {
  return { type: mssql.NVarChar(mssql.MAX), value };
}

/**
 * The predicates of a state filter on alias `o`, with the state literals written into the text: the optimizer
 * matches a filtered index only to a query whose predicate implies the index's filter at compile time, which a
 * parameter (`o.state = @state`) never does, so every page of one state read the clustered index. The literals come
 * from core's constant table, never from input; a state that is not in it is refused. `Failed` (every literal this
 * version does not know) is one <> per known literal, the filter of `<table>_unknown_state` (0008) as written there
 * (a filtered index takes no NOT IN).
 */
function statePredicates(table: Table, state: AdminFilter['state']): string[] {
  if (state === undefined) return [];
  const literals = STATE_LITERALS[table];
  if (state === 'Failed') return Object.values(literals).map((literal) => `o.state <> N'${literal}'`);
  if (!Object.hasOwn(literals, state)) {
    throw new QueueBoxError(`No ${table} state ${JSON.stringify(state)}`, { context: { table } });
  }
  return [`o.state = N'${literals[state]}'`];
}

/**
 * The filtered index that holds the rows of `state` (see `adminListStatement`); none for sent rows, most of the
 * table, which the clustered index serves in id order, or without a state. None for pending rows either: no index
 * holds them in id order (0008 adds none, as that would be one more index entry for every row stored, retried or
 * requeued), and a hint that names an index the migrations do not create fails the statement.
 */
function stateIndex(table: Table, state: AdminFilter['state']): string | undefined {
  if (state === 'Processing') return `${table}_lease`;
  if (state === 'Dead') return `${table}_dead`;
  if (state === 'Failed') return `${table}_unknown_state`;
  return undefined;
}

/** The WHERE predicates of `filter` on alias `o`, adding their parameters to `values`. */
function predicates(table: Table, filter: AdminFilter, values: Record<string, SqlParam>): string[] {
  const where = statePredicates(table, filter.state);
  if (table === 'outbox' && filter.topic !== undefined) {
    values.topic = text(filter.topic);
    // Trailing spaces count (T-SQL pads before comparing; migration 0003), and so does letter case.
    where.push('o.topic = @topic AND DATALENGTH(o.topic) = DATALENGTH(@topic)');
  }
  if (table === 'inbox' && filter.source !== undefined) {
    values.source = text(filter.source);
    where.push('o.source = @source AND DATALENGTH(o.source) = DATALENGTH(@source)');
  }
  if (filter.ids !== undefined) {
    values.ids = jsonParam(filter.ids);
    where.push("o.id IN (SELECT j.id FROM OPENJSON(@ids) WITH (id BIGINT '$') AS j)");
  }
  return where;
}

/** Row counts per stored state literal (unknown literals included, as they are). */
export function adminStateCountsStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT o.state, COUNT_BIG(*) AS n FROM ${tableName(schema, table)} AS o GROUP BY o.state;`,
    values: {},
  };
}

/**
 * The due pending rows of `table` that meet `rows` (with `o` as the alias), read through the filtered indexes as on
 * PostgreSQL: the outbox's `outbox_due_unkeyed` (no key) and `outbox_active_key` (keyed, pending or processing),
 * whose filters the predicates repeat so the optimizer can match them; a plain `state = N'pending'` on the outbox
 * matched neither and read every row, sent ones included.
 */
function pendingRows(schema: string, table: Table, rows: string): string[] {
  const t = tableName(schema, table);
  if (table === 'inbox')
    return [`SELECT o.scheduled_at FROM ${t} AS o WHERE o.state = N'pending' AND ${rows}`];
  return [
    `SELECT o.scheduled_at FROM ${t} AS o WHERE o.state = N'pending' AND o.[key] IS NULL AND ${rows}`,
    `SELECT o.scheduled_at FROM ${t} AS o
  WHERE o.state IN (N'pending', N'processing') AND o.[key] IS NOT NULL AND o.state = N'pending' AND ${rows}`,
  ];
}

/** The smallest `scheduled_at` of the pending rows of `table` that meet `rows` (see `pendingRows`). */
function minScheduledAt(schema: string, table: Table, rows: string): string {
  return `(SELECT MIN(m.scheduled_at) FROM (${pendingRows(schema, table, rows).join('\nUNION ALL\n')}) AS m)`;
}

/**
 * Ends the gauges' statements, which bind no variable: under `ALTER DATABASE … SET PARAMETERIZATION FORCED` SQL
 * Server would turn their literals (`N'pending'`, `N'dead'`) into parameters, and a filtered index whose filter the
 * predicate repeats no longer matches a parameter, so each count would read a whole index. Microsoft's "Forced
 * Parameterization" lists statements that contain the RECOMPILE query hint among those it leaves alone; compiling
 * them at each run costs little every 15 s.
 */
const GAUGE_RECOMPILE = 'OPTION (RECOMPILE)';

/**
 * The gauges' counts of `table` (`AdminStore.gauges`), one row, each from the filtered index that holds its rows
 * (their filters repeated, so the optimizer can match them): pending (`pendingRows`), processing (`*_lease`), dead
 * (`*_dead`), unknown literals (`*_unknown_state`); and `rows_estimate`, the rows of the table's heap or clustered
 * index by `sys.partitions` (metadata the engine keeps, approximate). No finished row is read, as on PostgreSQL,
 * also under forced parameterization (`GAUGE_RECOMPILE`).
 */
export function adminGaugeCountsStatement(schema: string, table: Table): Statement {
  const t = tableName(schema, table);
  const pending = pendingRows(schema, table, '1 = 1').join('\nUNION ALL\n');
  const unknown = statePredicates(table, 'Failed').join(' AND ');
  return {
    text: `SELECT (SELECT COUNT_BIG(*) FROM (${pending}) AS p) AS pending,
  (SELECT COUNT_BIG(*) FROM ${t} AS o WHERE o.state = N'processing') AS processing,
  (SELECT COUNT_BIG(*) FROM ${t} AS o WHERE o.state = N'dead') AS dead,
  (SELECT COUNT_BIG(*) FROM ${t} AS o WHERE ${unknown}) AS unknown,
  (SELECT CAST(SUM(s.rows) AS FLOAT) FROM sys.partitions AS s WHERE s.object_id = OBJECT_ID(N'${t}') AND s.index_id IN (0, 1)) AS rows_estimate
${GAUGE_RECOMPILE};`,
    values: {},
  };
}

/** Dead rows of `table` (a seek on the state index). */
export function adminDeadCountStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT COUNT_BIG(*) AS n FROM ${tableName(schema, table)} AS o WHERE o.state = N'dead';`,
    values: {},
  };
}

/**
 * Milliseconds since the longest-waiting due pending row became due, by the database clock; NULL when none. A gauge:
 * recompiled at each run (`GAUGE_RECOMPILE`).
 */
export function adminOldestPendingStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT DATEDIFF_BIG(millisecond, ${minScheduledAt(schema, table, `o.scheduled_at <= ${UTC_NOW}`)}, SYSUTCDATETIME()) AS age_ms
${GAUGE_RECOMPILE};`,
    values: {},
  };
}

/**
 * The earliest scheduled_at of the pending rows scheduled after now (database clock); NULL when none. `sources`
 * (inbox only; null: every source) narrows it to those sources. Through the filtered indexes (`pendingRows`).
 */
export function adminNextDueStatement(
  schema: string,
  table: Table,
  sources: readonly string[] | null,
): Statement {
  const bySource = table === 'inbox' && sources !== null;
  const rows = `o.scheduled_at > ${UTC_NOW}${
    bySource
      ? ` AND EXISTS (SELECT 1 FROM OPENJSON(@sources) WITH (name NVARCHAR(400) '$') AS j WHERE j.name COLLATE ${BINARY} = o.source AND DATALENGTH(j.name) = DATALENGTH(o.source))`
      : ''
  }`;
  return {
    text: `SELECT ${minScheduledAt(schema, table, rows)} AS next_due, ${UTC_NOW} AS db_now;`,
    values: bySource ? { sources: jsonParam(sources) } : {},
  };
}

/**
 * Dead rows per topic (outbox) or source (inbox), the largest groups first, at most `limit` groups. Grouped by the
 * length too, so names that differ only in trailing spaces stay apart, as on PostgreSQL.
 */
export function adminDeadGroupsStatement(schema: string, table: Table, limit: number): Statement {
  const column = table === 'outbox' ? 'topic' : 'source';
  return {
    text: `SELECT TOP (@limit) o.${column} AS name, COUNT_BIG(*) AS n
FROM ${tableName(schema, table)} AS o
WHERE o.state = N'dead'
GROUP BY o.${column}, DATALENGTH(o.${column})
ORDER BY n DESC, name;`,
    values: { limit: { type: mssql.Int, value: limit } },
  };
}

/**
 * One page: rows after `afterId` (none: from the start) matching `filter`, ascending id, at most `limit`. A page of
 * dead rows, of unknown literals or of processing rows reads that state's filtered index, named in a table hint
 * (`stateIndex`): dead ones from `<table>_dead` (0007) and unknown literals from `<table>_unknown_state` (0008), each
 * in id order, so a page is the next `limit` entries after the cursor, each looked up by primary key; processing
 * rows, which are few (the claims' batches in flight), from `<table>_lease`, then sorted. The hint, not the
 * optimizer's costing: under the row goal of TOP it prices a walk of the clustered index in id order, expecting the
 * state's rows spread evenly, below the key lookups (as on PostgreSQL, where that walk read 39,355 buffers for one
 * page of pending rows behind the sent ones). The predicates imply each index's filter (`statePredicates`), so the
 * hint can always be followed. Pending rows have no filtered index in id order, and their page carries no hint: it is
 * left to the optimizer, which may walk the clustered index. PostgreSQL reads them from the claims' indexes
 * (store-postgres's `pendingPageText`); the same here would rest on how the optimizer plans an OR or a UNION of two
 * filtered indexes under TOP, which its documentation does not state and no server here can show. Sent rows, most of
 * the table, and pages without a state are read along the clustered index.
 */
export function adminListStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  afterId: RowId | null,
  limit: number,
): Statement {
  const values: Record<string, SqlParam> = { limit: { type: mssql.Int, value: limit } };
  const where = predicates(table, filter, values);
  if (afterId !== null) {
    values.afterId = { type: mssql.BigInt, value: afterId };
    where.push('o.id > @afterId');
  }
  const columns = table === 'outbox' ? OUTBOX_COLUMNS : INBOX_COLUMNS;
  const index = stateIndex(table, filter.state);
  return {
    text: `SELECT TOP (@limit) ${columns}
FROM ${tableName(schema, table)} AS o${index === undefined ? '' : ` WITH (INDEX (${index}))`}
${where.length > 0 ? `WHERE ${where.join(' AND ')}\n` : ''}ORDER BY o.id;`,
    values,
  };
}

/**
 * Outbox only: the row at `alias` has no key, or no row of its key is processing. A claim takes a key's smallest
 * pending-or-processing id when it is pending, so a dead row requeued behind a row of its key in delivery would be
 * claimed while that row is still out: two rows of one key in flight. Such rows stay dead until the key settles.
 * Keys compare binary (migration 0003) and by length, so trailing spaces count, as on PostgreSQL.
 */
function keyIdle(t: string, alias: string): string {
  return `(${alias}.[key] IS NULL OR NOT EXISTS (SELECT 1 FROM ${t} AS p WHERE p.state = N'processing' AND p.[key] = ${alias}.[key] AND DATALENGTH(p.[key]) = DATALENGTH(${alias}.[key])))`;
}

/**
 * Inbox only: the row at `alias` has no aggregate id, or no row of its source and aggregate id is processing (as
 * store-postgres's `aggregateIdle`, which says why), compared as the relay's claim compares them.
 */
function aggregateIdle(t: string, alias: string): string {
  return `(${alias}.aggregate_id IS NULL OR NOT EXISTS (SELECT 1 FROM ${t} AS p WHERE p.state = N'processing' AND ${sameAggregate('p', alias)}))`;
}

/**
 * The dead rows a requeue of `table` may take now: `filter`'s whose key (outbox) or source and aggregate id (inbox)
 * has no row processing.
 */
function requeueable(
  table: Table,
  filter: AdminFilter,
  values: Record<string, SqlParam>,
  t: string,
): string[] {
  const where = ["o.state = N'dead'", ...predicates(table, { ...filter, state: undefined }, values)];
  where.push(table === 'outbox' ? keyIdle(t, 'o') : aggregateIdle(t, 'o'));
  return where;
}

/**
 * What a requeue would take: the first `limit` matching dead row ids, ascending, each with the count of every
 * matching dead row (window count, taken before TOP). No row at all means none matches. Rows whose key (outbox) or
 * source and aggregate id (inbox) has a row processing are left out (`adminKeysInFlightStatement` lists them).
 */
export function adminRequeuePreviewStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  limit: number,
): Statement {
  const t = tableName(schema, table);
  const values: Record<string, SqlParam> = { limit: { type: mssql.Int, value: limit } };
  const where = requeueable(table, filter, values, t);
  return {
    text: `SELECT TOP (@limit) o.id, COUNT_BIG(*) OVER () AS total
FROM ${t} AS o
WHERE ${where.join(' AND ')}
ORDER BY o.id;`,
    values,
  };
}

/**
 * dead → pending for the first `batchSize` matching dead rows in id order (at most MAX_ROWS_PER_STATEMENT; the
 * admin store runs larger batches as several statements): attempt 0, due now, claim cleared. last_error is left
 * as it is: the error of the row's last failed attempt, history until another attempt fails. Rows another
 * requeue holds are skipped, not waited for; the UPDATE re-checks the state on the locked row. Rows whose key
 * (outbox) or source and aggregate id (inbox) has a row processing are left dead, as the statement reads them. The outbox requeue runs it in a
 * transaction after `adminRequeueCandidatesStatement`, `adminTryLockKeysStatement` and
 * `adminLockPendingKeyRowsStatement`, on the candidates whose key lock it obtained (sql-store-common's
 * `createSqlAdminStore`, with admin-store.ts's `tryLockKeys`); alone it is the inbox's requeue.
 */
export function adminRequeueStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  batchSize: number,
): Statement {
  const t = tableName(schema, table);
  const values: Record<string, SqlParam> = {
    batchSize: { type: mssql.Int, value: statementRows(batchSize) },
  };
  const where = requeueable(table, filter, values, t);
  return {
    text: `${TAKE_BEGIN}WITH chosen AS (
  SELECT TOP (@batchSize) o.id
  FROM ${t} AS o WITH (${TAKE})
  WHERE ${where.join(' AND ')}
  ORDER BY o.id
)
UPDATE r
SET state = N'pending', attempt = 0, scheduled_at = SYSUTCDATETIME(), claim_token = NULL, lease_until = NULL,
  updated_at = SYSUTCDATETIME()
OUTPUT inserted.id
FROM ${t} AS r WITH (FORCESEEK)
INNER JOIN chosen ON chosen.id = r.id
WHERE r.state = N'dead';${TAKE_END}`,
    values,
  };
}

/**
 * Most dead rows of the selection, in id order from its first requeueable one, that a batch reads for the other dead
 * rows of its keys, as store-postgres's `REQUEUE_KEY_SCAN_ROWS` (no index holds the dead rows by key).
 */
export const REQUEUE_KEY_SCAN_ROWS = 100_000;

/**
 * The outbox rows one requeue batch takes, whole keys, as store-postgres's statement of this name says: the first
 * `batchSize` (at most MAX_ROWS_PER_STATEMENT) dead rows of `filter` whose key is idle, ascending id, and every other
 * dead row of their keys among the next {@link REQUEUE_KEY_SCAN_ROWS} dead rows of the selection, at most `maxRows`
 * rows in all (at most MAX_ROWS_PER_STATEMENT: the admin store passes no more), keys in the order of their first row,
 * the first key alone in part when it has more. U-locked for the requeue's transaction; rows another session holds
 * are skipped, not waited for. Answers `id`, `key` and `taken`, how many of the first `batchSize` were found.
 */
export function adminRequeueCandidatesStatement(
  schema: string,
  filter: AdminFilter,
  batchSize: number,
  maxRows: number = batchSize,
): Statement {
  const t = tableName(schema, 'outbox');
  const values: Record<string, SqlParam> = {
    batchSize: { type: mssql.Int, value: statementRows(batchSize) },
    maxRows: { type: mssql.Int, value: statementRows(Math.max(batchSize, maxRows)) },
  };
  const where = requeueable('outbox', filter, values, t);
  // The keys' other dead rows: the key check is the first rows' (their keys are idle); the update checks it again.
  const dead = ["o.state = N'dead'", ...predicates('outbox', { ...filter, state: undefined }, values)];
  const sameKey = (a: string, b: string) =>
    `${a}.[key] = ${b}.[key] COLLATE ${BINARY} AND DATALENGTH(${a}.[key]) = DATALENGTH(${b}.[key])`;
  return {
    text: `${TAKE_BEGIN}WITH firsts AS (
  SELECT TOP (@batchSize) o.id, o.[key]
  FROM ${t} AS o
  WHERE ${where.join(' AND ')}
  ORDER BY o.id
),
ahead AS (
  SELECT TOP (${REQUEUE_KEY_SCAN_ROWS}) o.id, o.[key]
  FROM ${t} AS o
  WHERE ${dead.join(' AND ')} AND o.[key] IS NOT NULL AND o.id >= (SELECT MIN(f.id) FROM firsts AS f)
  ORDER BY o.id
),
leads AS (
  SELECT f.[key], MIN(f.id) AS lead FROM firsts AS f WHERE f.[key] IS NOT NULL GROUP BY f.[key]
),
whole AS (
  SELECT f.id, f.id AS lead FROM firsts AS f WHERE f.[key] IS NULL
  UNION
  SELECT a.id, l.lead FROM ahead AS a INNER JOIN leads AS l ON ${sameKey('a', 'l')}
  UNION
  SELECT f.id, l.lead FROM firsts AS f INNER JOIN leads AS l ON ${sameKey('f', 'l')}
),
ranked AS (
  SELECT w.id, w.lead,
    COUNT(*) OVER (ORDER BY w.lead) AS through_key,
    ROW_NUMBER() OVER (PARTITION BY w.lead ORDER BY w.id) AS nth,
    MIN(w.lead) OVER () AS first_lead
  FROM whole AS w
)
SELECT o.id, o.[key], (SELECT COUNT(*) FROM firsts) AS taken
FROM ${t} AS o WITH (${TAKE})
WHERE o.id IN (SELECT r.id FROM ranked AS r WHERE r.through_key <= @maxRows OR (r.lead = r.first_lead AND r.nth <= @maxRows))
  AND o.state = N'dead'
ORDER BY o.id;${TAKE_END}`,
    values,
  };
}

/**
 * Takes the per-key insert locks of `keys` (at most {@link LOCKS_PER_BATCH} distinct ones) without waiting:
 * `sp_getapplock` of the very resource an insert of the key locks (`lockOutboxKeysStatement`:
 * `outboxKeyLockResource(schema, key)`, Exclusive, owned by the transaction) with `@LockTimeout = 0`, which answers
 * -1 at once when another transaction holds it (an application's enqueue of the key that has not committed, another
 * requeue or a replay of it). Answers `statuses`: each return code followed by a comma, one per distinct key in the
 * order of first appearance in `keys` (0 or 1 obtained; -1 held elsewhere, the requeue leaves its rows dead,
 * `key_busy`; anything else is an error). Not waiting is the point: a requeue that waited for one busy key would
 * meanwhile hold up every writer of the keys it had already locked. A lock this transaction holds already is
 * granted again.
 */
export function adminTryLockKeysStatement(schema: string, keys: readonly string[]): Statement {
  quoteSchema(schema);
  const distinct = [...new Set(keys)];
  if (distinct.length > LOCKS_PER_BATCH) {
    throw new StoreError(`One lock batch takes at most ${LOCKS_PER_BATCH} outbox keys`, {
      context: { keys: distinct.length },
    });
  }
  const values: Record<string, SqlParam> = {};
  const lines = distinct.map((key, i) => {
    values[`resource${i}`] = { type: mssql.NVarChar(255), value: outboxKeyLockResource(schema, key) };
    return `EXEC @status = sys.sp_getapplock @Resource = @resource${i}, @LockMode = N'Exclusive', @LockOwner = N'Transaction', @LockTimeout = 0;
SELECT @statuses = @statuses + CAST(@status AS NVARCHAR(11)) + N',';`;
  });
  return {
    text: `DECLARE @status INT = 0;
DECLARE @statuses NVARCHAR(MAX) = N'';
${lines.join('\n')}
SELECT @statuses AS statuses;`,
    values,
  };
}

/**
 * U-locks the head of each of `keys` — its smallest pending-or-processing id — without waiting, as store-postgres's
 * statement of this name says: the head is found first (by key, `TOP (1)` in id order, a plain read: under
 * READ_COMMITTED_SNAPSHOT the last committed version, without it a read that may wait, at most LOCK_TIMEOUT, for a
 * row being written), then locked by primary key, the claim's resource, with `READPAST` and its state checked again
 * on the locked row. Answers `held_key`, one row per key whose head another session held (a claim moving it to
 * processing, a settle or reclaim of it at that moment) or that is no longer active: the requeue leaves that key's
 * dead rows dead (`key_busy`). Waiting for the heads, as it once did, could deadlock with a settle that holds one
 * of them and wants another (an outside audit on PostgreSQL). A claim that comes to a head the requeue holds skips
 * it (its READPAST); a settle, retry or lease reclaim of it waits for the requeue to commit. Run in the requeue's
 * transaction after the keys' `adminTryLockKeysStatement` locks, which keep new rows of the keys out.
 */
export function adminLockPendingKeyRowsStatement(schema: string, keys: readonly string[]): Statement {
  return {
    text: `${TAKE_BEGIN}SELECT k.[key] AS held_key
FROM OPENJSON(@keys) WITH ([key] NVARCHAR(450) '$') AS k
CROSS APPLY (
  SELECT TOP (1) o.id
  FROM ${tableName(schema, 'outbox')} AS o WITH (FORCESEEK)
  WHERE o.[key] = k.[key] COLLATE ${BINARY} AND DATALENGTH(o.[key]) = DATALENGTH(k.[key])
    AND o.state IN (N'pending', N'processing') AND o.[key] IS NOT NULL
  ORDER BY o.id
) AS h
WHERE NOT EXISTS (
  SELECT 1 FROM ${tableName(schema, 'outbox')} AS r WITH (${TAKE}, FORCESEEK)
  WHERE r.id = h.id AND r.state IN (N'pending', N'processing')
);${TAKE_END}`,
    values: { keys: jsonParam([...new Set(keys)]) },
  };
}

/**
 * The dead rows of `filter` a requeue leaves dead because a row of their key (outbox) or of their source and
 * aggregate id (inbox) is processing: the first `limit`, ascending id, each with that key or aggregate id (as
 * `key`), the smallest processing id of it, and the count of them all (window count, taken before TOP).
 */
export function adminKeysInFlightStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  limit: number,
): Statement {
  const t = tableName(schema, table);
  const values: Record<string, SqlParam> = { limit: { type: mssql.Int, value: limit } };
  const key = table === 'outbox' ? '[key]' : 'aggregate_id';
  const same =
    table === 'outbox'
      ? 'p.[key] = o.[key] AND DATALENGTH(p.[key]) = DATALENGTH(o.[key])'
      : sameAggregate('p', 'o');
  const where = [
    "o.state = N'dead'",
    `o.${key} IS NOT NULL`,
    ...predicates(table, { ...filter, state: undefined }, values),
  ];
  return {
    text: `SELECT TOP (@limit) o.id, o.${key} AS [key], f.processing_id, COUNT_BIG(*) OVER () AS total
FROM ${t} AS o
CROSS APPLY (
  SELECT TOP (1) p.id AS processing_id
  FROM ${t} AS p
  WHERE p.state = N'processing' AND ${same}
  ORDER BY p.id
) AS f
WHERE ${where.join(' AND ')}
ORDER BY o.id;`,
    values,
  };
}

/** A new pending outbox row copied from sent row `id` (topic, key, payload, headers, max_attempts). */
export function adminReplayStatement(schema: string, id: RowId): Statement {
  const t = tableName(schema, 'outbox');
  return {
    text: `INSERT INTO ${t} (topic, [key], payload, headers, max_attempts)
OUTPUT inserted.id
SELECT s.topic, s.[key], s.payload, s.headers, s.max_attempts
FROM ${t} AS s
WHERE s.id = @id AND s.state = N'sent';`,
    values: { id: { type: mssql.BigInt, value: id } },
  };
}

/**
 * The columns a redact clears, per table: the message data a sender or the application chose. The inbox's
 * aggregate_id and correlation_id (both NULL-able) may hold a customer id, and no read of a final row needs them.
 * `null` passes the payload's ISJSON check (0001 wraps it in [ ]), `{}` the headers'.
 */
const REDACTED_COLUMNS: Readonly<Record<Table, string>> = {
  outbox: `payload = N'null', headers = N'{}', last_error = NULL`,
  inbox: `payload = N'null', headers = N'{}', last_error = NULL, aggregate_id = NULL, correlation_id = NULL`,
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
    text: `UPDATE r
SET ${REDACTED_COLUMNS[table]}
OUTPUT inserted.id
FROM ${tableName(schema, table)} AS r
WHERE r.id = @id AND r.state IN (N'${literals.Sent}', N'${literals.Dead}');`,
    values: { id: { type: mssql.BigInt, value: id } },
  };
}

/** The stored state literal of row `id` of `table` (no row when there is none). */
export function adminRowStateStatement(schema: string, table: Table, id: RowId): Statement {
  return {
    text: `SELECT o.state FROM ${tableName(schema, table)} AS o WHERE o.id = @id;`,
    values: { id: { type: mssql.BigInt, value: id } },
  };
}

/**
 * Deletes up to `batchSize` rows (at most MAX_ROWS_PER_STATEMENT; the admin store runs larger batches as several
 * statements) in state `state` (a known literal) whose updated_at is older than `olderThanMs`, oldest first
 * (index `<table>_state_updated`). Rows another purge holds are skipped; the DELETE re-checks state and age on
 * the locked row. A derived table where PostgreSQL has a CTE: the same plan, and it keeps the T-SQL parse check
 * able to read a DELETE.
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
    text: `${TAKE_BEGIN}DELETE d
FROM ${t} AS d WITH (FORCESEEK)
INNER JOIN (
  SELECT TOP (@batchSize) o.id
  FROM ${t} AS o WITH (${TAKE})
  WHERE o.state = @state AND o.updated_at < ${utcNowPlus('@offsetMs')}
  ORDER BY o.updated_at, o.id
) AS doomed ON doomed.id = d.id
WHERE d.state = @state AND d.updated_at < ${utcNowPlus('@offsetMs')};${TAKE_END}`,
    values: {
      state: { type: mssql.NVarChar(50), value: STATE_LITERALS[table][state] },
      offsetMs: { type: mssql.BigInt, value: -clampDelayMs(olderThanMs) },
      batchSize: { type: mssql.Int, value: statementRows(batchSize) },
    },
  };
}
