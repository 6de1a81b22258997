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

/** Row counts per stored state literal (unknown literals included, as they are). */
export function adminStateCountsStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT state, count(*)::bigint AS n FROM ${tableName(schema, table)} GROUP BY state`,
    values: [],
  };
}

/** Milliseconds since the longest-waiting due pending row became due, by the database clock; NULL when none. */
export function adminOldestPendingStatement(schema: string, table: Table): Statement {
  return {
    text: `SELECT floor(extract(epoch FROM now() - min(scheduled_at)) * 1000)::float8 AS age_ms
FROM ${tableName(schema, table)}
WHERE state = 'pending' AND scheduled_at <= now()`,
    values: [],
  };
}

/**
 * The earliest scheduled_at of the pending rows scheduled after now (database clock); NULL when none. `sources`
 * (inbox only; null: every source) narrows it to those sources; the pending rows are few, as the partial
 * pending indexes assume.
 */
export function adminNextDueStatement(
  schema: string,
  table: Table,
  sources: readonly string[] | null,
): Statement {
  const bySource = table === 'inbox' && sources !== null;
  return {
    text: `SELECT min(scheduled_at) AS next_due
FROM ${tableName(schema, table)}
WHERE state = 'pending' AND scheduled_at > now()${bySource ? ' AND source = ANY ($1::text[])' : ''}`,
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
 * What a requeue would take: the first `limit` matching dead row ids, ascending, each with the count of every
 * matching dead row (window count, taken before the LIMIT). No row at all means none matches.
 */
export function adminRequeuePreviewStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  limit: number,
): Statement {
  const values: unknown[] = [];
  const where = ["state = 'dead'", ...predicates(table, { ...filter, state: undefined }, values)];
  values.push(limit);
  return {
    text: `SELECT o.id::text AS id, count(*) OVER ()::bigint AS total
FROM ${tableName(schema, table)} o
WHERE ${where.join(' AND ')}
ORDER BY o.id
LIMIT $${values.length}::int`,
    values,
  };
}

/**
 * dead → pending for the first `batchSize` matching dead rows in id order: attempt 0, due now, claim cleared.
 * last_error is kept as the reason the row died. Rows another requeue holds are skipped, not waited for.
 */
export function adminRequeueStatement(
  schema: string,
  table: Table,
  filter: AdminFilter,
  batchSize: number,
): Statement {
  const t = tableName(schema, table);
  const values: unknown[] = [];
  const where = ["state = 'dead'", ...predicates(table, { ...filter, state: undefined }, values)];
  values.push(batchSize);
  return {
    text: `WITH chosen AS (
  SELECT id FROM ${t}
  WHERE ${where.join(' AND ')}
  ORDER BY id
  LIMIT $${values.length}::int
  FOR UPDATE SKIP LOCKED
)
UPDATE ${t} r
SET state = 'pending', attempt = 0, scheduled_at = now(), claim_token = NULL, lease_until = NULL,
    updated_at = now()
WHERE r.id = ANY (ARRAY(SELECT id FROM chosen)) AND r.state = 'dead'
RETURNING r.id::text AS id`,
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
