/**
 * The gauges' estimate of the finished rows on PGlite, where no autovacuum or ANALYZE runs: it was missing until the
 * first VACUUM after retention, and 0 after a purge that emptied the table, however many rows came next (review of
 * 904252b). A table whose statistics give no density is counted instead; retention's VACUUM on PGlite analyses.
 */
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgliteExecutor, createPostgresStore, PGLITE_PARSERS, type SqlExecutor } from '../src/index.ts';

describe('the finished-row estimate of the gauges on PGlite', () => {
  let db: PGlite;
  let executor: SqlExecutor;
  let store: ReturnType<typeof createPostgresStore>;
  beforeAll(async () => {
    db = await PGlite.create({ parsers: PGLITE_PARSERS });
    executor = createPgliteExecutor(db);
    store = createPostgresStore({ executor, schema: 'queuebox', provider: 'pglite' });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
  });

  const addSent = (n: number) =>
    executor.query(
      `INSERT INTO queuebox.outbox (topic, payload, state, attempt, max_attempts, sent_at)
       SELECT 't', '{}'::jsonb, 'sent', 1, 3, now() FROM generate_series(1, ${n})`,
    );
  const finished = async () => (await store.admin.gauges()).outbox.finishedEstimate;

  it('counts the rows of a table never analysed, and of one emptied by a purge and filled again', async () => {
    // Prepare + Act: rows before any VACUUM
    await addSent(3_000);
    const neverAnalysed = await finished();
    // …a VACUUM after retention (it analyses on PGlite)
    await addSent(2_000);
    await store.admin.vacuum?.(['outbox']);
    const analysed = await finished();
    // …a purge of every row, its VACUUM, then new rows
    await executor.query('DELETE FROM queuebox.outbox');
    await store.admin.vacuum?.(['outbox']);
    const emptied = await finished();
    await addSent(4_000);
    const refilled = await finished();
    // Assess
    expect(neverAnalysed).toBe(3_000);
    expect(analysed).toBeCloseTo(5_000, -2);
    expect(emptied).toBe(0);
    expect(refilled).toBe(4_000);
  });
});
