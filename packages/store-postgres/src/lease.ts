/**
 * Leases: a claimed row is processing until its `lease_until`; a worker that dies leaves it there, and these
 * statements give expired claims back (`reclaimExpiredOutboxStatement`, `reclaimExpiredInboxStatement`), run by
 * the stores' `reclaimExpired` (`reclaimExpiredOutbox`, `reclaimExpiredInbox`). A settle after its lease was
 * reclaimed finds another token and is stale (settle.ts).
 */
import type { ReclaimReport } from '@queuebox/core';
import type { SqlExecutor, Statement } from './executor.ts';
import { inboxTable, outboxTable } from './schema-name.ts';
import { DEFAULT_RECLAIM_LIMIT } from './settle.ts';

/**
 * Expired claims, oldest lease first, at most `limit`: processing → pending counting the attempt they used, or
 * → dead when none remains; last_error says `lease expired`. Rows another reclaimer holds are skipped.
 */
export function reclaimExpiredOutboxStatement(schema: string, limit: number): Statement {
  const t = outboxTable(schema);
  return {
    text: `WITH expired AS (
  SELECT o.id FROM ${t} o
  WHERE o.state = 'processing' AND o.lease_until < pg_catalog.now()
  ORDER BY o.lease_until
  LIMIT $1::int
  FOR UPDATE SKIP LOCKED
),
reclaimed AS (
  UPDATE ${t} o
  SET attempt = o.attempt + 1,
      state = CASE WHEN o.attempt + 1 >= o.max_attempts THEN 'dead' ELSE 'pending' END,
      last_error = 'lease expired', claim_token = NULL, lease_until = NULL, updated_at = pg_catalog.now()
  WHERE o.id = ANY (ARRAY(SELECT id FROM expired))
  RETURNING o.state
)
SELECT pg_catalog.count(*) FILTER (WHERE state = 'pending')::int AS returned,
       pg_catalog.count(*) FILTER (WHERE state = 'dead')::int AS dead
FROM reclaimed`,
    values: [limit],
  };
}

/**
 * Expired claims of the sources, oldest lease first, at most `limit`: processing → pending counting the attempt
 * they used, never dead (the relay's rows are forwarded, not delivered; the outbox counts deliveries).
 */
export function reclaimExpiredInboxStatement(
  schema: string,
  sources: readonly string[],
  limit: number,
): Statement {
  const t = inboxTable(schema);
  return {
    text: `WITH expired AS (
  SELECT i.id FROM ${t} i
  WHERE i.state = 'processing' AND i.lease_until < pg_catalog.now() AND i.source = ANY($1::text[])
  ORDER BY i.lease_until
  LIMIT $2::int
  FOR UPDATE SKIP LOCKED
),
reclaimed AS (
  UPDATE ${t} b
  SET state = 'pending', attempt = b.attempt + 1, last_error = 'lease expired',
      claim_token = NULL, lease_until = NULL, updated_at = pg_catalog.now()
  WHERE b.id = ANY (ARRAY(SELECT id FROM expired))
  RETURNING b.id
)
SELECT pg_catalog.count(*)::int AS returned FROM reclaimed`,
    values: [sources, limit],
  };
}

/** The outbox store's `reclaimExpired`: at most `limit` (default 1000) expired claims. */
export async function reclaimExpiredOutbox(
  executor: SqlExecutor,
  schema: string,
  limit: number = DEFAULT_RECLAIM_LIMIT,
): Promise<ReclaimReport> {
  const { text, values } = reclaimExpiredOutboxStatement(schema, Math.max(0, Math.floor(limit)));
  const { rows } = await executor.query<{ returned: number; dead: number }>(text, values);
  return { returned: Number(rows[0]?.returned ?? 0), dead: Number(rows[0]?.dead ?? 0) };
}

/** The inbox store's `reclaimExpired`: at most `limit` (default 1000) expired claims of `sources`. */
export async function reclaimExpiredInbox(
  executor: SqlExecutor,
  schema: string,
  sources: readonly string[],
  limit: number = DEFAULT_RECLAIM_LIMIT,
): Promise<ReclaimReport> {
  if (sources.length === 0) return { returned: 0, dead: 0 };
  const { text, values } = reclaimExpiredInboxStatement(
    schema,
    [...new Set(sources)],
    Math.max(0, Math.floor(limit)),
  );
  const { rows } = await executor.query<{ returned: number }>(text, values);
  return { returned: Number(rows[0]?.returned ?? 0), dead: 0 };
}
