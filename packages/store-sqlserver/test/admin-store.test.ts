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

/**
 * `remaining` dead rows with ids 1…remaining, without keys; each statement that chooses rows takes up to its
 * @batchSize of them. An outbox requeue then updates the candidates it chose (by @ids), and finds no key in flight.
 */
function deadRows(remaining: number) {
  const sizes: number[] = [];
  let next = 1;
  const executor: SqlExecutor = {
    async query<R>(text: string, values?: SqlParams) {
      if (text.includes('AS processing_id')) return { rows: [], rowCount: 0 } as unknown as QueryResult<R>;
      const chosen = values?.ids?.value;
      if (typeof chosen === 'string') {
        const rows = (JSON.parse(chosen) as string[]).map((id) => ({ id }));
        return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
      }
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

describe('an outbox requeue of keyed rows', () => {
  /** Which of the requeue's statements `text` is. */
  function stepOf(text: string): string {
    if (text.includes('AS processing_id')) return 'keys in flight';
    if (text.includes('sp_getapplock')) return 'key locks';
    if (text.includes('WITH (UPDLOCK, ROWLOCK, READCOMMITTEDLOCK, FORCESEEK)'))
      return 'pending rows of the keys';
    if (text.includes('OUTPUT inserted.id')) return 'update';
    if (text.includes('SELECT TOP (@batchSize) o.id, o.[key]')) return 'candidates';
    return text;
  }

  it('locks the keys and their pending rows in its transaction before the update, then reports keys in flight', async () => {
    const steps: string[] = [];
    let updated: unknown;
    let inTransaction = false;
    const answers: Record<string, unknown[]> = {
      candidates: [
        { id: '5', key: 'Q' },
        { id: '6', key: null },
      ],
      'key locks': [{ status: 0 }],
      'pending rows of the keys': [{ locked: 1 }],
      // Row 5's key got a row processing while the requeue waited for the pending rows: the update leaves it dead.
      update: [{ id: '6' }],
      'keys in flight': [{ id: '5', key: 'Q', processing_id: '7', total: 1 }],
    };
    const executor: SqlExecutor = {
      async query<R>(text: string, values?: SqlParams) {
        const step = stepOf(text);
        steps.push(`${inTransaction ? 'transaction' : 'autocommit'}: ${step}`);
        if (step === 'update') updated = values?.ids?.value;
        const rows = answers[step] ?? [];
        return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
      },
      async transaction(fn) {
        inTransaction = true;
        try {
          return await fn(executor);
        } finally {
          inTransaction = false;
        }
      },
      close: async () => {},
    };

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue('outbox', {
      topic: 'orders.created',
    });

    expect(steps).toEqual([
      'transaction: candidates',
      'transaction: key locks',
      'transaction: pending rows of the keys',
      'transaction: update',
      'autocommit: keys in flight',
    ]);
    expect(updated).toBe('["5","6"]');
    expect(result).toEqual({
      dryRun: false,
      count: 1,
      ids: ['6'],
      more: false,
      skipped: { reason: 'key_in_flight', count: 1, rows: [{ id: '5', key: 'Q', processingId: '7' }] },
    });
  });
});
