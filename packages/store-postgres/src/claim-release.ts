import type { SqlExecutor, Statement } from './executor.ts';
import type { RawRow } from './rows.ts';
import { inboxTable, outboxTable } from './schema-name.ts';

/**
 * Gives back, untried, rows a claim's statement committed but the claim cannot answer (the reading of its answer
 * failed after the UPDATE: a timestamp the session answered in another style, a large column's read): pending again
 * under no claim, no attempt counted, where they would otherwise have waited for their lease to expire (their keys
 * held, an attempt counted at the reclaim). Best effort: on failure the lease still ends their claim.
 */
export async function releaseAnswered(
  executor: SqlExecutor,
  schema: string,
  table: 'outbox' | 'inbox',
  answered: readonly RawRow[],
): Promise<void> {
  const claims = answered.filter(
    (row) =>
      typeof row.claim_token === 'string' && (typeof row.id === 'string' || typeof row.id === 'number'),
  );
  if (claims.length === 0) return;
  const { text, values } = releaseAnsweredStatement(schema, table, claims);
  await executor.query(text, values).catch(() => undefined);
}

function releaseAnsweredStatement(
  schema: string,
  table: 'outbox' | 'inbox',
  rows: readonly RawRow[],
): Statement {
  const t = table === 'outbox' ? outboxTable(schema) : inboxTable(schema);
  return {
    text: `UPDATE ${t} r
SET state = 'pending', claim_token = NULL, lease_until = NULL, updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::uuid[])) AS c(id, token)
WHERE r.id = ANY ($1::bigint[]) AND r.id = c.id AND r.claim_token = c.token AND r.state = 'processing'`,
    values: [rows.map((row) => String(row.id)), rows.map((row) => String(row.claim_token))],
  };
}
