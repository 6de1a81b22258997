/**
 * Requeue and purge of more rows than one statement takes, without a server: the executor answers each statement
 * with as many rows as its @batchSize asks while rows remain, as SQL Server would.
 */
import { ADMIN_MAX_BATCH_SIZE, StoreError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import * as adminSql from '../src/admin-sql.ts';
import { createSqlServerAdminStore } from '../src/admin-store.ts';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import { outboxKeyLockResource } from '../src/outbox-key-lock.ts';
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
    if (text.includes('AS held_key')) return 'key heads';
    if (text.includes('OUTPUT inserted.id')) return 'update';
    if (text.includes('SELECT TOP (@batchSize) o.id, o.[key]')) return 'candidates';
    return text;
  }

  /**
   * An executor answering each step with `answers[step]` (a function of the statement's values, or rows), and
   * recording the steps (in a transaction or not) and the values of each.
   */
  function scripted(answers: Record<string, unknown[] | ((values: SqlParams | undefined) => unknown[])>) {
    const steps: string[] = [];
    const values: Record<string, (SqlParams | undefined)[]> = {};
    let inTransaction = false;
    const executor: SqlExecutor = {
      async query<R>(text: string, params?: SqlParams) {
        const step = stepOf(text);
        steps.push(`${inTransaction ? 'transaction' : 'autocommit'}: ${step}`);
        values[step] = [...(values[step] ?? []), params];
        const answer = answers[step] ?? [];
        const rows = typeof answer === 'function' ? answer(params) : answer;
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
    return { executor, steps, values };
  }

  it('tries the key locks and locks the key heads in its transaction before the update, then reports keys in flight', async () => {
    const { executor, steps, values } = scripted({
      candidates: [
        { id: '5', key: 'Q' },
        { id: '6', key: null },
      ],
      'key locks': [{ statuses: '0,' }],
      'key heads': [{ locked: 1 }],
      // Row 5's key got a row processing while the requeue waited for its head: the update leaves it dead.
      update: [{ id: '6' }],
      'keys in flight': [{ id: '5', key: 'Q', processing_id: '7', total: 1 }],
    });

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue('outbox', {
      topic: 'orders.created',
    });

    expect(steps).toEqual([
      'transaction: candidates',
      'transaction: key locks',
      'transaction: key heads',
      'transaction: update',
      'autocommit: keys in flight',
    ]);
    expect(values.update?.[0]?.ids?.value).toBe('["5","6"]');
    expect(values['key heads']?.[0]?.keys?.value).toBe('["Q"]');
    expect(result).toEqual({
      dryRun: false,
      count: 1,
      ids: ['6'],
      more: false,
      skipped: { reason: 'key_in_flight', count: 1, rows: [{ id: '5', key: 'Q', processingId: '7' }] },
    });
  });

  it('does not wait for a key another transaction holds: its rows stay dead (key_busy), the others are requeued', async () => {
    const { executor, steps, values } = scripted({
      candidates: [
        { id: '5', key: 'Q' },
        { id: '6', key: 'R' },
        { id: '7', key: null },
        { id: '8', key: 'Q' },
      ],
      // Q is held elsewhere (-1 at once: @LockTimeout = 0), R is granted.
      'key locks': [{ statuses: '-1,0,' }],
      'key heads': [{ locked: 1 }],
      update: (params) => (JSON.parse(String(params?.ids?.value)) as string[]).map((id) => ({ id })),
    });

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue('outbox', {
      topic: 'orders.created',
    });

    const lockText = adminSql.adminTryLockKeysStatement(SCHEMA, ['Q', 'R']).text;
    expect(lockText).toContain('@LockTimeout = 0;');
    expect(Object.values(values['key locks']?.[0] ?? {}).map((v) => v.value)).toEqual([
      outboxKeyLockResource(SCHEMA, 'Q'),
      outboxKeyLockResource(SCHEMA, 'R'),
    ]);
    expect(values['key heads']?.[0]?.keys?.value).toBe('["R"]');
    expect(values.update?.[0]?.ids?.value).toBe('["6","7"]');
    expect(steps.at(-1)).toBe('autocommit: keys in flight');
    expect(result).toEqual({
      dryRun: false,
      count: 2,
      ids: ['6', '7'],
      more: false,
      keyBusy: {
        reason: 'key_busy',
        count: 2,
        rows: [
          { id: '5', key: 'Q' },
          { id: '8', key: 'Q' },
        ],
      },
    });
  });

  it('a batch that requeued nothing while more may remain still reports what it left dead', async () => {
    const { executor, steps } = scripted({
      candidates: [
        { id: '5', key: 'Q' },
        { id: '6', key: 'Q' },
      ],
      'key locks': [{ statuses: '-1,' }],
      'keys in flight': [{ id: '9', key: 'P', processing_id: '10', total: 1 }],
    });

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue(
      'outbox',
      { topic: 'orders.created' },
      { batchSize: 2 },
    );

    expect(steps).toEqual([
      'transaction: candidates',
      'transaction: key locks',
      'autocommit: keys in flight',
    ]);
    expect(result).toEqual({
      dryRun: false,
      count: 0,
      ids: [],
      more: true,
      skipped: { reason: 'key_in_flight', count: 1, rows: [{ id: '9', key: 'P', processingId: '10' }] },
      keyBusy: {
        reason: 'key_busy',
        count: 2,
        rows: [
          { id: '5', key: 'Q' },
          { id: '6', key: 'Q' },
        ],
      },
    });
  });

  it('a full batch that requeued rows leaves the report of keys in flight to the batch after it', async () => {
    const { executor, steps } = scripted({
      candidates: [
        { id: '5', key: 'Q' },
        { id: '6', key: null },
      ],
      'key locks': [{ statuses: '-1,' }],
      update: [{ id: '6' }],
    });

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue(
      'outbox',
      { topic: 'orders.created' },
      { batchSize: 2 },
    );

    expect(steps).not.toContain('autocommit: keys in flight');
    expect(result).toEqual({
      dryRun: false,
      count: 1,
      ids: ['6'],
      more: true,
      keyBusy: { reason: 'key_busy', count: 1, rows: [{ id: '5', key: 'Q' }] },
    });
  });

  it('stops a large requeue at a part that requeued nothing (the next would choose the same rows)', async () => {
    const { executor, steps } = scripted({
      candidates: (params) =>
        Array.from({ length: Number(params?.batchSize?.value) }, (_, i) => ({ id: String(i + 1), key: 'Q' })),
      'key locks': [{ statuses: '-1,' }],
    });

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue(
      'outbox',
      { topic: 'orders.created' },
      { batchSize: ADMIN_MAX_BATCH_SIZE },
    );

    expect(steps.filter((step) => step.endsWith('candidates'))).toHaveLength(1);
    expect(result).toMatchObject({
      count: 0,
      ids: [],
      more: true,
      keyBusy: { count: MAX_ROWS_PER_STATEMENT },
    });
    expect(result.keyBusy?.rows).toHaveLength(100);
  });

  it('a large requeue answers each busy row once, and not one that a later part requeued after all', async () => {
    // Part 1 chooses rows 1…4000: 1 and 2 of key Q, busy, the rest unkeyed. Part 2 chooses 1 and 2 again first (Q
    // is free now) and rows 4001…5998, of which the first 3 are of key R, busy.
    let part = 0;
    const { executor } = scripted({
      candidates: (params) => {
        part += 1;
        const asked = Number(params?.batchSize?.value);
        if (part === 1) {
          return Array.from({ length: asked }, (_, i) => ({ id: String(i + 1), key: i < 2 ? 'Q' : null }));
        }
        return [
          { id: '1', key: 'Q' },
          { id: '2', key: 'Q' },
          ...Array.from({ length: asked - 2 }, (_, i) => ({ id: String(4001 + i), key: i < 3 ? 'R' : null })),
        ];
      },
      'key locks': (params) => [{ statuses: Object.keys(params ?? {}).length === 1 ? '-1,' : '0,-1,' }],
      update: (params) => (JSON.parse(String(params?.ids?.value)) as string[]).map((id) => ({ id })),
    });

    const result = await createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue(
      'outbox',
      { topic: 'orders.created' },
      { batchSize: 6000 },
    );

    expect(part).toBe(2);
    expect(result.count).toBe(3998 + 2 + 1995);
    expect(result.ids).toContain('1');
    expect(result.keyBusy).toEqual({
      reason: 'key_busy',
      count: 3,
      rows: [
        { id: '4001', key: 'R' },
        { id: '4002', key: 'R' },
        { id: '4003', key: 'R' },
      ],
    });
    // The last part chose as many rows as it asked for: more may remain.
    expect(result.more).toBe(true);
  });

  it('fails on a key lock status other than granted or busy, and on a short answer', async () => {
    const store = (statuses: string) =>
      createSqlServerAdminStore({
        executor: scripted({ candidates: [{ id: '5', key: 'Q' }], 'key locks': [{ statuses }] }).executor,
        schema: SCHEMA,
      });

    await expect(store('-999,').requeue('outbox', { topic: 't' })).rejects.toThrow(StoreError);
    await expect(store('-999,').requeue('outbox', { topic: 't' })).rejects.toThrow(/sp_getapplock -999/);
    await expect(store('').requeue('outbox', { topic: 't' })).rejects.toThrow(/0 statuses for 1 keys/);
  });
});
