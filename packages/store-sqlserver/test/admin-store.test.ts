/**
 * Requeue and purge of more rows than one statement takes, without a server: the executor answers each statement
 * with as many rows as its @batchSize asks while rows remain, as SQL Server would.
 */
import { ADMIN_MAX_BATCH_SIZE } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createSqlServerAdminStore } from '../src/admin-store.ts';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import { MAX_ROWS_PER_STATEMENT } from '../src/outbox-sql.ts';
import { SCHEMA } from './statements.ts';

/** `remaining` dead rows with ids 1…remaining; each statement takes up to its @batchSize of them. */
function deadRows(remaining: number) {
  const sizes: number[] = [];
  let next = 1;
  const executor: SqlExecutor = {
    async query<R>(_text: string, values?: SqlParams) {
      const asked = Number(values?.batchSize?.value);
      sizes.push(asked);
      const taken = Math.min(asked, remaining);
      remaining -= taken;
      const rows = Array.from({ length: taken }, () => ({ id: String(next++) }));
      return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
    },
    transaction: (fn) => fn(executor),
    close: async () => {},
  };
  return { executor, sizes };
}

describe(`requeue and purge of more than ${MAX_ROWS_PER_STATEMENT} rows`, () => {
  it('requeue runs statements of at most 4,000 rows and answers as one call of the whole size', async () => {
    const { executor, sizes } = deadRows(20_000);

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue(
      'outbox',
      { topic: 'orders.created' },
      { batchSize: ADMIN_MAX_BATCH_SIZE },
    );

    expect(sizes).toEqual([4000, 4000, 2000]);
    expect(result.count).toBe(ADMIN_MAX_BATCH_SIZE);
    expect(result.ids).toHaveLength(ADMIN_MAX_BATCH_SIZE);
    expect(result.more).toBe(true);
  });

  it('requeue stops at the first short statement and then says there is no more', async () => {
    const { executor, sizes } = deadRows(5_000);

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue(
      'inbox',
      { source: 'stripe' },
      { batchSize: 9_000 },
    );

    expect(sizes).toEqual([4000, 4000]);
    expect([result.count, result.more]).toEqual([5_000, false]);
  });

  it('purge runs statements of at most 4,000 rows and answers the total', async () => {
    const { executor, sizes } = deadRows(9_500);

    const purged = await createSqlServerAdminStore({ executor, schema: SCHEMA }).purge({
      table: 'outbox',
      state: 'Sent',
      olderThanMs: 0,
      batchSize: ADMIN_MAX_BATCH_SIZE,
    });

    expect(sizes).toEqual([4000, 4000, 2000]);
    expect(purged).toBe(9_500);
  });

  it('keeps one statement up to 4,000 rows', async () => {
    const { executor, sizes } = deadRows(10);

    await createSqlServerAdminStore({ executor, schema: SCHEMA }).purge({
      table: 'inbox',
      state: 'Dead',
      olderThanMs: 0,
      batchSize: 4000,
    });

    expect(sizes).toEqual([4000]);
  });
});
