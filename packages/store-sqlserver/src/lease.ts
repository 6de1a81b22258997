/**
 * Leases: a claimed row is processing until its `lease_until`; a worker that dies leaves it there, and these
 * statements give expired claims back (`reclaimExpiredOutboxStatement`, `reclaimExpiredInboxStatement`), run by
 * the stores' `reclaimExpired` (`reclaimExpiredOutbox`, `reclaimExpiredInbox`). A settle after its lease was
 * reclaimed finds another token and is stale (settle.ts). As in outbox-sql.ts, an OUTPUT clause sits alone on its
 * line.
 */
import { MessageState, type ReclaimReport } from '@queuebox/core';
import mssql from 'mssql';
import { isLockTimeout } from './errors.ts';
import type { SqlExecutor, Statement } from './executor.ts';
import { isSource, rowsPerSource, SOURCES } from './inbox-claim.ts';
import { jsonParam, statementRows, TAKE, TAKE_BEGIN, TAKE_END, UTC_NOW } from './outbox-sql.ts';
import { outboxState } from './rows.ts';
import { inboxTable, outboxTable } from './schema-name.ts';
import { DEFAULT_RECLAIM_LIMIT } from './settle.ts';

/**
 * Expired claims, oldest lease first, at most `limit` (and {@link MAX_ROWS_PER_STATEMENT}): processing → pending
 * counting the attempt they used, or → dead when none remains; last_error says `lease expired`. Rows another
 * reclaimer holds are skipped; the UPDATE re-checks state and lease on the locked row. Answers one row per
 * reclaimed row with its new state.
 */
export function reclaimExpiredOutboxStatement(schema: string, limit: number): Statement {
  const t = outboxTable(schema);
  return {
    text: `${TAKE_BEGIN}WITH expired AS (
  SELECT TOP (@limit) o.id
  FROM ${t} AS o WITH (${TAKE})
  WHERE o.state = N'processing' AND o.lease_until < ${UTC_NOW}
  ORDER BY o.lease_until, o.id
)
UPDATE o
SET attempt = o.attempt + 1,
  state = CASE WHEN o.attempt + 1 >= o.max_attempts THEN N'dead' ELSE N'pending' END,
  last_error = N'lease expired', claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.state
FROM ${t} AS o WITH (FORCESEEK)
INNER JOIN expired ON expired.id = o.id
WHERE o.state = N'processing' AND o.lease_until < ${UTC_NOW};${TAKE_END}`,
    values: { limit: { type: mssql.Int, value: statementRows(limit) } },
  };
}

/**
 * Expired claims of the sources, oldest lease first, at most `limit` (and 4,000, see MAX_ROWS_PER_STATEMENT):
 * processing → pending counting the attempt they used, never dead (the relay's rows are forwarded, not delivered;
 * the outbox counts deliveries). Each source seeks its own expired rows in inbox_lease (source, lease_until), at
 * most `rowsPerSource` of them so the statement's locks stay below lock escalation; the UPDATE re-checks state and
 * lease on the locked row. Answers one row per reclaimed row.
 */
export function reclaimExpiredInboxStatement(
  schema: string,
  sources: readonly string[],
  limit: number,
): Statement {
  const t = inboxTable(schema);
  return {
    text: `${TAKE_BEGIN}WITH expired AS (
  SELECT TOP (@limit) e.id
  FROM ${SOURCES}
  CROSS APPLY (
    SELECT TOP (@perSource) i.id, i.lease_until
    FROM ${t} AS i WITH (${TAKE})
    WHERE ${isSource('i.source')} AND i.state = N'processing' AND i.lease_until < ${UTC_NOW}
    ORDER BY i.lease_until, i.id
  ) AS e
  ORDER BY e.lease_until, e.id
)
UPDATE b
SET state = N'pending', attempt = b.attempt + 1, last_error = N'lease expired',
  claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id
FROM ${t} AS b WITH (FORCESEEK)
INNER JOIN expired ON expired.id = b.id
WHERE b.state = N'processing' AND b.lease_until < ${UTC_NOW};${TAKE_END}`,
    values: {
      sources: jsonParam(sources),
      limit: { type: mssql.Int, value: statementRows(limit) },
      perSource: { type: mssql.Int, value: rowsPerSource(new Set(sources).size, limit) },
    },
  };
}

/**
 * The outbox store's `reclaimExpired`: at most `limit` (default 1000) expired claims; error 1222 (a lock wait past
 * TAKE_LOCK_TIMEOUT_MS) answers that nothing was reclaimed now.
 */
export async function reclaimExpiredOutbox(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  limit: number = DEFAULT_RECLAIM_LIMIT,
): Promise<ReclaimReport> {
  const n = Math.max(0, Math.floor(limit));
  if (n === 0) return { returned: 0, dead: 0 };
  const { text, values } = reclaimExpiredOutboxStatement(schema, n);
  let rows: { state: unknown }[];
  try {
    rows = (await executor.query<{ state: unknown }>(text, values)).rows;
  } catch (error) {
    if (isLockTimeout(error)) return { returned: 0, dead: 0 };
    throw error;
  }
  const dead = rows.filter((r) => outboxState(r.state) === MessageState.Dead).length;
  return { returned: rows.length - dead, dead };
}

/** The inbox store's `reclaimExpired`: at most `limit` (default 1000) expired claims of `sources`. */
export async function reclaimExpiredInbox(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  sources: readonly string[],
  limit: number = DEFAULT_RECLAIM_LIMIT,
): Promise<ReclaimReport> {
  const n = Math.max(0, Math.floor(limit));
  if (sources.length === 0 || n === 0) return { returned: 0, dead: 0 };
  const { text, values } = reclaimExpiredInboxStatement(schema, [...new Set(sources)], n);
  try {
    const { rows } = await executor.query(text, values);
    return { returned: rows.length, dead: 0 };
  } catch (error) {
    if (isLockTimeout(error)) return { returned: 0, dead: 0 };
    throw error;
  }
}
