/**
 * The gauge statements (oldest pending age, next due, dead rows, counts per state) read the partial indexes of the
 * pending, processing and finished rows, never every row of the table: outbox-tick samples the oldest pending age and
 * reads the next due time at every invocation, and the gauges follow every drain that changed rows. Found from
 * outside on a million-row outbox: `WHERE state = 'pending'` matched no index of the outbox (keyed pending rows are in
 * `outbox_active_key`, unkeyed ones in `outbox_due_unkeyed`) and was planned as a parallel scan of every row, sent ones
 * kept for retention included: 170 ms at a million rows, about a second at five.
 */
import {
  dropSchemasAfterPass,
  ensurePlanTestDatabase,
  freshSchemaName,
  planTestPostgresUrl,
  testPool,
} from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminDeadCountStatement,
  adminGaugeCountsStatement,
  adminNextDueStatement,
  adminOldestPendingStatement,
  adminStateCountsStatement,
  createPgExecutor,
  createPostgresStore,
  type SqlExecutor,
  type Statement,
} from '../src/index.ts';

const schema = freshSchemaName('pg_gauge_plans');
// In the plan tests' own database: an index-only plan needs the pages all-visible, which VACUUM cannot mark while
// another test file's transaction older than the rows runs in the same database.
dropSchemasAfterPass(() => [schema], planTestPostgresUrl());

describe('the gauge statements on a grown table', () => {
  let executor: SqlExecutor;
  beforeAll(async () => {
    executor = createPgExecutor(testPool(1, await ensurePlanTestDatabase()));
    await createPostgresStore({ executor, schema }).migrate();
    const outbox = `"${schema}".outbox`;
    const inbox = `"${schema}".inbox`;
    // 30,000 sent rows kept for retention, a few pending (keyed and not, due and later), processing and dead.
    await executor.query(
      `INSERT INTO ${outbox} (topic, payload, state, attempt, max_attempts, sent_at)
       SELECT 't', '{}', 'sent', 1, 3, now() FROM generate_series(1, 30000)`,
    );
    await executor.query(
      `INSERT INTO ${outbox} (topic, key, payload, max_attempts, scheduled_at)
       SELECT 't', CASE WHEN g % 2 = 0 THEN 'k' || g END, '{}', 3, now() + (g - 20) * interval '1 minute'
       FROM generate_series(1, 40) g`,
    );
    await executor.query(
      `INSERT INTO ${outbox} (topic, payload, state, max_attempts) SELECT 't', '{}', 'dead', 3 FROM generate_series(1, 5)`,
    );
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, payload, state, max_attempts, processed_at)
       SELECT 's', 'p' || g, '{}', 'processed', 3, now() FROM generate_series(1, 30000) g`,
    );
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, payload, max_attempts) SELECT 's', 'n' || g, '{}', 3 FROM generate_series(1, 20) g`,
    );
    await executor.query(`VACUUM ANALYZE ${outbox}`);
    await executor.query(`VACUUM ANALYZE ${inbox}`);
  });
  afterAll(async () => {
    await executor.close();
  });

  /** The statement's plan as it ran (EXPLAIN ANALYZE): a node it never executed says so. */
  async function plan(statement: Statement): Promise<string> {
    const { rows } = await executor.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${statement.text}`,
      statement.values,
    );
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  }

  it.each([
    ['oldest pending, outbox', () => adminOldestPendingStatement(schema, 'outbox')],
    ['oldest pending, inbox', () => adminOldestPendingStatement(schema, 'inbox')],
    ['next due, outbox', () => adminNextDueStatement(schema, 'outbox', null)],
    ['next due, inbox', () => adminNextDueStatement(schema, 'inbox', ['s'])],
    ['dead rows, outbox', () => adminDeadCountStatement(schema, 'outbox')],
    ['counts per state, outbox', () => adminStateCountsStatement(schema, 'outbox')],
    ['counts per state, inbox', () => adminStateCountsStatement(schema, 'inbox')],
    ['gauge counts, outbox', () => adminGaugeCountsStatement(schema, 'outbox')],
    ['gauge counts, inbox', () => adminGaugeCountsStatement(schema, 'inbox')],
  ])('%s reads indexes, not the table', async (_name, statement) => {
    // Act
    const text = await plan(statement());
    // Assess: no scan of the table ran (the gauge counts' fallback count of a table without statistics is planned,
    // and never executed on an analysed table)
    const tableScans = text.split('\n').filter((line) => /Seq Scan on (outbox|inbox)/.test(line));
    expect(tableScans.filter((line) => !line.includes('never executed'))).toEqual([]);
  });

  it('answers what the plain statements answered', async () => {
    // Act
    const { rows: counts } = await executor.query<{ state: string; n: string }>(
      adminStateCountsStatement(schema, 'outbox').text,
    );
    const { rows: plain } = await executor.query<{ state: string; n: string }>(
      `SELECT state, count(*)::bigint AS n FROM "${schema}".outbox GROUP BY state`,
    );
    const { rows: oldest } = await executor.query<{ age_ms: number }>(
      adminOldestPendingStatement(schema, 'outbox').text,
    );
    const { rows: plainOldest } = await executor.query<{ age_ms: number }>(
      `SELECT floor(extract(epoch FROM now() - min(scheduled_at)) * 1000)::float8 AS age_ms
       FROM "${schema}".outbox WHERE state = 'pending' AND scheduled_at <= now()`,
    );
    // Assess: the same counts (a state with no row is 0 here, absent there), the same age within the clock's step.
    const asMap = (rows: readonly { state: string; n: string }[]) =>
      Object.fromEntries(rows.filter((r) => Number(r.n) > 0).map((r) => [r.state, Number(r.n)]));
    expect(asMap(counts)).toEqual(asMap(plain));
    expect(Math.abs((oldest[0]?.age_ms ?? 0) - (plainOldest[0]?.age_ms ?? 0))).toBeLessThan(1000);
    expect(oldest[0]?.age_ms).toBeGreaterThan(18 * 60_000);
  });
});
