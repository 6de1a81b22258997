/**
 * The local runtime's retention on PGlite (`npm start`'s default store), which runs no autovacuum: a retention run
 * that deleted rows is followed by a plain VACUUM of the tables it deleted from, at most once per
 * `vacuumIntervalMs`, so the table's size stays bounded across purge cycles instead of growing by what every run
 * deleted (an outside audit: 24 -> 48 -> 72 MB over three cycles). A real PostgreSQL's store offers no vacuum.
 */
import { PGlite } from '@electric-sql/pglite';
import type { Store } from '@queuebox/core';
import {
  createPgExecutor,
  createPgliteExecutor,
  createPostgresStore,
  PGLITE_PARSERS,
  type SqlExecutor,
} from '@queuebox/store-postgres';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { type Maintenance, startMaintenance } from '../src/maintenance.ts';
import { createQueueBoxMetrics } from '../src/metrics.ts';

const ROWS_PER_CYCLE = 4000;

describe('retention on PGlite vacuums what it deleted', { timeout: 120_000 }, () => {
  let executor: SqlExecutor;
  let store: Store;
  let stop: AbortController;

  beforeEach(async () => {
    const db = await PGlite.create({ parsers: PGLITE_PARSERS });
    executor = createPgliteExecutor(db);
    store = createPostgresStore({ executor, schema: 'queuebox', provider: 'pglite' });
    await store.migrate();
    stop = new AbortController();
  });

  afterEach(async () => {
    stop.abort();
    await store.close();
  });

  function maintenance(vacuumIntervalMs?: number): Maintenance {
    return startMaintenance({
      admin: store.admin,
      // Rows older than an hour: the cycles write theirs two hours old.
      retention: { keepSentHours: 1, keepDeadHours: 0, batchSize: 10_000 },
      metrics: createQueueBoxMetrics(),
      logger: createLogger({ level: 'error', write: () => undefined }),
      signal: stop.signal,
      statsIntervalMs: 0,
      // The timer's own run at start finds nothing; the test runs retention with `retain()`.
      retentionIntervalMs: 3_600_000,
      ...(vacuumIntervalMs === undefined ? {} : { vacuumIntervalMs }),
    });
  }

  /** Rows sent two hours ago, as many as a cycle of deliveries leaves, each with a 400-byte payload. */
  async function sentRows(): Promise<void> {
    await executor.query(
      `INSERT INTO queuebox.outbox (topic, payload, state, attempt, max_attempts, sent_at, updated_at)
       SELECT 't', jsonb_build_object('pad', repeat('x', 400), 'g', g), 'sent', 1, 3,
              now() - interval '2 hours', now() - interval '2 hours'
       FROM generate_series(1, ${ROWS_PER_CYCLE}) g`,
    );
  }

  const size = async () =>
    Number(
      (await executor.query<{ b: unknown }>(`SELECT pg_total_relation_size('queuebox.outbox') AS b`)).rows[0]
        ?.b,
    );
  const rows = async () =>
    Number((await executor.query<{ n: unknown }>(`SELECT count(*) AS n FROM queuebox.outbox`)).rows[0]?.n);

  it('keeps the outbox size bounded across purge cycles', async () => {
    // Prepare
    const running = maintenance(0);
    const sizes: number[] = [];

    // Act: five cycles of rows sent, then retention deleting them.
    for (let cycle = 0; cycle < 5; cycle++) {
      await sentRows();
      sizes.push(await size());
      await running.retain();
      expect(await rows()).toBe(0);
    }

    // Assess: the fifth cycle's rows fit in the space the first left free (one cycle's worth, with some slack for
    // the indexes' pages); without a VACUUM each cycle added a cycle's worth (sizes 1x, 2x, 3x, 4x, 5x).
    const first = sizes[0] as number;
    expect(sizes.at(-1), `outbox sizes per cycle: ${sizes.join(', ')}`).toBeLessThan(first * 1.5);
  });

  it('vacuums at most once per interval, and only after a run that deleted rows', async () => {
    // Prepare
    const vacuum = vi.spyOn(store.admin, 'vacuum' as never);
    const running = maintenance(3_600_000);

    // Act
    await sentRows();
    await running.retain(); // deleted rows: vacuums
    await sentRows();
    await running.retain(); // deleted rows, within the interval: waits
    await running.retain(); // deleted nothing, still within the interval

    // Assess
    expect(vacuum).toHaveBeenCalledTimes(1);
    expect(vacuum).toHaveBeenCalledWith(['outbox']);
  });

  it('is not offered by a store on a PostgreSQL server (autovacuum does it)', async () => {
    // Prepare: a store over pg that is never connected (nothing runs).
    const server = createPostgresStore({
      executor: createPgExecutor(new pg.Pool({ max: 1 })),
      schema: 'queuebox',
    });

    // Assess
    expect(server.provider).toBe('postgres');
    expect(server.admin.vacuum).toBeUndefined();
    expect(store.admin.vacuum).toBeTypeOf('function');
    await server.close();
  });
});
