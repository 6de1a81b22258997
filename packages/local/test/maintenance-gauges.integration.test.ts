/**
 * The local runtime's 15-second gauge refresh (`startMaintenance`'s `refreshStats`) on a real PostgreSQL whose tables
 * hold 30,000 finished rows each: every statement the refresh sends, run again under EXPLAIN ANALYZE, touches only
 * a few rows, never the finished ones (an outside audit: the refresh went through `admin.stats()`, which counts
 * every sent row: 4 s, a parallel scan, every 15 s at 15M rows). The gauges still read the exact pending,
 * processing and dead counts, and the sent/processed series an estimate near the truth.
 */
import type { Store } from '@queuebox/core';
import {
  createPgExecutor,
  createPostgresStore,
  type SqlExecutor,
  type Statement,
} from '@queuebox/store-postgres';
import {
  dropSchemasAfterPass,
  ensurePlanTestDatabase,
  freshSchemaName,
  planTestPostgresUrl,
  requireServices,
  testPool,
} from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { startMaintenance } from '../src/maintenance.ts';
import { createQueueBoxMetrics } from '../src/metrics.ts';

const needs = await requireServices('local: maintenance gauges', ['postgres']);
const FINISHED = 30_000;

describe.skipIf(needs.skipReason)('the periodic gauge refresh reads no finished row', () => {
  const schema = freshSchemaName('maint_gauges');
  dropSchemasAfterPass(() => [schema], planTestPostgresUrl());
  let executor: SqlExecutor;
  let store: Store;
  const sent: Statement[] = [];

  beforeAll(async () => {
    executor = createPgExecutor(testPool(2, await ensurePlanTestDatabase()));
    // The store's statements are recorded as they go out.
    const recording: SqlExecutor = {
      query: (text, values, options) => {
        sent.push({ text, values: values ?? [] });
        return executor.query(text, values, options);
      },
      transaction: (fn) => executor.transaction(fn),
      close: async () => undefined,
    };
    store = createPostgresStore({ executor: recording, schema });
    await store.migrate();
    const outbox = `"${schema}".outbox`;
    const inbox = `"${schema}".inbox`;
    await executor.query(
      `INSERT INTO ${outbox} (topic, payload, state, attempt, max_attempts, sent_at)
       SELECT 't', '{}', 'sent', 1, 3, now() FROM generate_series(1, ${FINISHED})`,
    );
    await executor.query(
      `INSERT INTO ${outbox} (topic, key, payload, max_attempts) SELECT 't', CASE WHEN g % 2 = 0 THEN 'k' || g END, '{}', 3 FROM generate_series(1, 7) g`,
    );
    await executor.query(
      `INSERT INTO ${outbox} (topic, payload, state, max_attempts) SELECT 't', '{}', 'dead', 3 FROM generate_series(1, 5)`,
    );
    await executor.query(
      `INSERT INTO ${outbox} (topic, payload, state, max_attempts, lease_until) SELECT 't', '{}', 'processing', 3, now() + interval '1 minute' FROM generate_series(1, 2)`,
    );
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, payload, state, max_attempts, processed_at)
       SELECT 's', 'p' || g, '{}', 'processed', 3, now() FROM generate_series(1, ${FINISHED}) g`,
    );
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, payload, max_attempts) SELECT 's', 'n' || g, '{}', 3 FROM generate_series(1, 3) g`,
    );
    // What autovacuum does on its own after this many changes (0007 sets it to 1% / 2% of the rows).
    await executor.query(`VACUUM ANALYZE ${outbox}`);
    await executor.query(`VACUUM ANALYZE ${inbox}`);
  });

  afterAll(async () => {
    await store?.close();
    await executor?.close();
  });

  /** Rows each plan node produced or filtered away, over all its loops (a scan of the finished rows: ≥ 30,000). */
  function rowsTouched(node: Record<string, unknown>): number[] {
    const loops = Number(node['Actual Loops'] ?? 1);
    const own =
      (Number(node['Actual Rows'] ?? 0) +
        Number(node['Rows Removed by Filter'] ?? 0) +
        Number(node['Rows Removed by Index Recheck'] ?? 0)) *
      loops;
    const children = (node.Plans as Record<string, unknown>[] | undefined) ?? [];
    return [own, ...children.flatMap(rowsTouched)];
  }

  it('sends only statements that touch a handful of rows, and sets the gauges', async () => {
    // Prepare
    const metrics = createQueueBoxMetrics();
    const stop = new AbortController();
    const maintenance = startMaintenance({
      admin: store.admin,
      retention: { keepSentHours: 0, keepDeadHours: 0, batchSize: 100 },
      metrics,
      logger: createLogger({ level: 'error', write: () => undefined }),
      signal: stop.signal,
      statsIntervalMs: 0,
      retentionIntervalMs: 0,
    });
    sent.length = 0;

    // Act
    await maintenance.refreshStats();
    stop.abort();
    await maintenance.done;

    // Assess: each statement, explained, touched few rows in every node.
    expect(sent.length).toBeGreaterThan(0);
    const touched: { text: string; most: number }[] = [];
    for (const statement of sent) {
      const { rows } = await executor.query<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`,
        statement.values,
      );
      const plan = rows[0]?.['QUERY PLAN'][0]?.Plan ?? {};
      touched.push({ text: statement.text.slice(0, 80), most: Math.max(...rowsTouched(plan)) });
    }
    expect(touched.filter((t) => t.most >= 1000)).toEqual([]);
    const text = await metrics.registry.metrics();
    expect(text).toContain('queuebox_rows{state="pending",table="outbox"} 7');
    expect(text).toContain('queuebox_rows{state="processing",table="outbox"} 2');
    expect(text).toContain('queuebox_rows{state="dead",table="outbox"} 5');
    expect(text).toContain('queuebox_dead_rows{table="outbox"} 5');
    expect(text).toContain('queuebox_rows{state="pending",table="inbox"} 3');
    const estimate = (table: string, state: string) =>
      Number(new RegExp(`queuebox_rows\\{state="${state}",table="${table}"\\} (\\d+)`).exec(text)?.[1]);
    expect(Math.abs(estimate('outbox', 'sent') - FINISHED)).toBeLessThan(FINISHED * 0.1);
    expect(Math.abs(estimate('inbox', 'processed') - FINISHED)).toBeLessThan(FINISHED * 0.1);
  });

  it('keeps the exact counts for /admin/stats and the CLI (stats())', async () => {
    // Act
    const stats = await store.admin.stats();

    // Assess
    expect(stats.outbox.counts).toEqual({ Pending: 7, Processing: 2, Sent: FINISHED, Dead: 5, Failed: 0 });
    expect(stats.inbox.counts).toEqual({ Pending: 3, Processing: 0, Sent: FINISHED, Dead: 0, Failed: 0 });
  });
});
