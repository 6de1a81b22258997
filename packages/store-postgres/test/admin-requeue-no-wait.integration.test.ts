/**
 * An outbox requeue batch waits for no lock, and takes whole keys. An outside audit saw bulk requeues of 20,000 dead
 * rows over 1,000 keys fail with a deadlock about one run in three while the runtime delivered: the requeue locked
 * the head of each key in key order, waiting, while a settle held one of those heads and wanted another. And a batch
 * that took only some dead rows of a key left the rest to a later batch, which found the key in flight (the part
 * requeued first being delivered) and left them dead while rows the application wrote meanwhile went first.
 */
import type { RowId } from '@queuebox/core';
import type { SqlRequeueResult } from '@queuebox/sql-store-common';
import { testPostgresUrl, useTestStore } from '@queuebox/testing';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { adminRequeueCandidatesStatement } from '../src/admin-sql.ts';
import { anOutboxMessage } from './messages.ts';

const LEASE_MS = 60_000;

describe('an outbox requeue batch', () => {
  const db = useTestStore('pg_requeue_no_wait', { url: testPostgresUrl(), storePoolSize: 4 });
  afterEach(async () => {
    await db.clear();
  });

  const claim = () => db.store.outbox.claim({ batchSize: 100, leaseMs: LEASE_MS });
  const stateOf = async (id: RowId) => (await db.store.outbox.get(id))?.state;
  const requeue = (...args: Parameters<typeof db.store.admin.requeue>) =>
    db.store.admin.requeue(...args) as Promise<SqlRequeueResult>;

  /** Inserts `keys` in order, one row each, dead after one failed attempt; answers their ids in order. */
  async function deadRows(keys: readonly (string | undefined)[], topic = 't'): Promise<RowId[]> {
    const ids = (await db.store.outbox.insert(keys.map((key) => anOutboxMessage({ topic, key })))) as RowId[];
    await db.pool.query(
      `UPDATE "${db.schema}".outbox SET state = 'dead', attempt = 1, last_error = 'HTTP 503' WHERE id = ANY ($1::bigint[])`,
      [ids],
    );
    return ids;
  }

  /** Whether some session of the test database waits for a row lock. */
  async function someoneWaits(): Promise<boolean> {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype IN ('tuple', 'transactionid')`,
    );
    return (rows[0]?.n ?? 0) > 0;
  }

  it('is in no deadlock with a claim or settle that holds one head of its keys and then wants another', async () => {
    // Prepare: keys A and B, each a dead row and a pending head behind it.
    const [deadA, deadB] = (await deadRows(['A', 'B'])) as [RowId, RowId];
    const [headA, headB] = (await db.store.outbox.insert([
      anOutboxMessage({ key: 'A' }),
      anOutboxMessage({ key: 'B' }),
    ])) as [RowId, RowId];
    // A settle (or claim) of a batch holding both heads, which has locked B's and comes to A's next.
    const settler: pg.Client = await db.connect();
    await settler.query('BEGIN');
    await settler.query(`SELECT id FROM "${db.schema}".outbox WHERE id = $1 FOR UPDATE`, [headB]);

    // Act: the requeue runs (it once locked A's head and waited for B's); then the settler locks A's head.
    const requeued = requeue('outbox', { ids: [deadA, deadB] }).then(
      (result) => result,
      (error: unknown) => error,
    );
    let settled = false;
    void requeued.then(() => (settled = true));
    for (let i = 0; i < 300 && !settled && !(await someoneWaits()); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const settle = await settler
      .query(`UPDATE "${db.schema}".outbox SET updated_at = updated_at WHERE id = $1`, [headA])
      .then(
        () => 'done',
        (error: { code?: string }) => `failed ${error.code}`,
      );
    await settler.query(settle === 'done' ? 'COMMIT' : 'ROLLBACK');
    const answer = await requeued;

    // Assess: neither failed; A's dead row is its key's head again, B's stays dead until its head is free.
    expect(settle).toBe('done');
    expect(answer).toEqual({
      dryRun: false,
      count: 1,
      ids: [deadA],
      more: false,
      keyBusy: { reason: 'key_busy', count: 1, rows: [{ id: deadB, key: 'B' }] },
    });
    expect(await stateOf(deadB)).toBe('Dead');
    expect(await requeue('outbox', { ids: [deadB] })).toMatchObject({ count: 1, ids: [deadB] });
    expect((await claim()).map((r) => r.id).sort()).toEqual([deadA, deadB].sort());
    expect(await stateOf(headA)).toBe('Pending');
  });

  it('takes every dead row of the keys of its first rows, so no later batch finds its key in flight', async () => {
    // Prepare: key Q's dead rows spread among others, as a destination outage leaves them.
    const [q1, r1, q2, u1, q3, r2] = (await deadRows(
      ['Q', 'R', 'Q', undefined, 'Q', 'R'],
      'orders',
    )) as RowId[] as [RowId, RowId, RowId, RowId, RowId, RowId];

    // Act: a batch of one row, then the runtime claims what it requeued (Q's head goes out).
    const first = await requeue('outbox', { topic: 'orders' }, { batchSize: 1 });
    const delivering = await claim();
    const second = await requeue('outbox', { topic: 'orders' }, { batchSize: 1 });

    // Assess: the first batch took all of Q; the second took R, whose rows were not in flight.
    expect(first).toEqual({ dryRun: false, count: 3, ids: [q1, q2, q3], more: true });
    expect(delivering.map((r) => r.id)).toEqual([q1]);
    expect(second).toMatchObject({ count: 2, ids: [r1, r2], more: true });
    expect(await stateOf(u1)).toBe('Dead');
    expect(await stateOf(q3)).toBe('Pending');
  });

  it('bounds a batch at maxRows, whole keys in the order of their first row, the first key in part if it must', async () => {
    // Prepare: A has 3 dead rows, B 2, C 1, interleaved.
    const [a1, b1, c1, a2, b2, a3] = (await deadRows(
      ['A', 'B', 'C', 'A', 'B', 'A'],
      'orders',
    )) as RowId[] as [RowId, RowId, RowId, RowId, RowId, RowId];
    const candidates = async (batchSize: number, maxRows: number) => {
      const { text, values } = adminRequeueCandidatesStatement(
        db.schema,
        { topic: 'orders' },
        batchSize,
        maxRows,
      );
      await client.query('BEGIN');
      const { rows } = await client.query<{ id: string; key: string; taken: number }>(text, [...values]);
      await client.query('ROLLBACK');
      return { ids: rows.map((r) => r.id), taken: rows[0]?.taken };
    };
    const client: pg.Client = await db.connect();

    // Act
    const wholeAB = await candidates(2, 5);
    const onlyA = await candidates(2, 4);
    const partOfA = await candidates(1, 2);
    const all = await candidates(3, 10);

    // Assess
    expect(wholeAB).toEqual({ ids: [a1, b1, a2, b2, a3], taken: 2 });
    expect(onlyA).toEqual({ ids: [a1, a2, a3], taken: 2 });
    expect(partOfA).toEqual({ ids: [a1, a2], taken: 1 });
    expect(all).toEqual({ ids: [a1, b1, c1, a2, b2, a3], taken: 3 });
  });
});
