/**
 * A requeue never puts two rows of one key in flight. A claim takes a key's smallest pending-or-processing id when
 * it is pending, so a dead row requeued while a later row of its key is being delivered would be claimed beside
 * it: the requeue leaves such rows dead and reports them (`skipped`, `key_in_flight`), by id and in bulk. It waits
 * for no lock: a row whose key another transaction is writing (its insert lock), or whose key's head a claim holds
 * at that moment, stays dead (`keyBusy`, `key_busy`), so no writer of the keys it holds waits behind one it cannot
 * get, and no claim or settle deadlocks with it (admin-requeue-no-wait.integration.test.ts).
 */
import type { OutboxRow, RowId } from '@queuebox/core';
import type { SqlRequeueResult } from '@queuebox/sql-store-common';
import { testPool, testPostgresUrl, useTestStore } from '@queuebox/testing';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminLockPendingKeyRowsStatement } from '../src/admin-sql.ts';
import { createPgExecutor, type SqlExecutor } from '../src/executor.ts';
import { createOutboxClaim } from '../src/outbox-claim.ts';
import { outboxKeyLockName } from '../src/outbox-key-lock.ts';
import { enqueueOutboxStatement } from '../src/outbox-sql.ts';
import { anOutboxMessage } from './messages.ts';

const LEASE_MS = 60_000;

describe('admin requeue of a dead keyed row while a row of its key is processing', () => {
  const db = useTestStore('pg_requeue_key', { url: testPostgresUrl(), storePoolSize: 4 });
  afterEach(async () => {
    await db.clear();
  });

  const claim = () => db.store.outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });
  const claimOf = (row: OutboxRow) => ({ id: row.id, claimToken: row.claimToken ?? '' });
  const stateOf = async (id: RowId) => (await db.store.outbox.get(id))?.state;
  const requeue = (...args: Parameters<typeof db.store.admin.requeue>) =>
    db.store.admin.requeue(...args) as Promise<SqlRequeueResult>;

  /** `key`'s first row dead (one attempt, failed), its second claimed: being delivered. */
  async function deadBehindProcessing(key: string, topic = 't'): Promise<{ dead: RowId; processing: RowId }> {
    const [dead, processing] = (await db.store.outbox.insert([
      anOutboxMessage({ key, topic }),
      anOutboxMessage({ key, topic }),
    ])) as [RowId, RowId];
    const [first] = await claim();
    if (first?.id !== dead) throw new Error(`claimed ${first?.id}, not the head ${dead}`);
    await db.store.outbox.markDead([{ ...claimOf(first), reason: 'HTTP 500', attempted: true }]);
    const [second] = await claim();
    if (second?.id !== processing) throw new Error(`claimed ${second?.id}, not ${processing}`);
    return { dead, processing };
  }

  /** Whether some session of the test database waits for a lock of `type` (`tuple`/`transactionid`, `advisory`). */
  async function someoneWaits(types: readonly string[]): Promise<boolean> {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = ANY ($1::text[])`,
      [types],
    );
    return (rows[0]?.n ?? 0) > 0;
  }

  /** Resolves once `done` has settled or a session waits for a lock of `types` (every 10 ms, at most 5 s). */
  async function untilSettledOrWaiting(done: Promise<unknown>, types: readonly string[]): Promise<void> {
    let settled = false;
    void done.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let i = 0; i < 500 && !settled && !(await someoneWaits(types)); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it('by id: leaves the row dead, names the key and the processing row; requeues it once the key settled', async () => {
    const { dead, processing } = await deadBehindProcessing('Q');

    const refused = await requeue('outbox', { ids: [dead] });
    const preview = await requeue('outbox', { ids: [dead] }, { dryRun: true });
    const claimedMeanwhile = await claim();

    expect(refused).toEqual({
      dryRun: false,
      count: 0,
      ids: [],
      more: false,
      skipped: {
        reason: 'key_in_flight',
        count: 1,
        rows: [{ id: dead, key: 'Q', processingId: processing }],
      },
    });
    expect(preview).toMatchObject({ dryRun: true, count: 0, ids: [], skipped: { count: 1 } });
    expect(await stateOf(dead)).toBe('Dead');
    expect(claimedMeanwhile).toEqual([]);

    const processingRow = (await db.store.outbox.get(processing)) as OutboxRow;
    await db.store.outbox.markSent([{ ...claimOf(processingRow), destination: 'd' }]);
    const accepted = await requeue('outbox', { ids: [dead] });

    expect(accepted).toEqual({ dryRun: false, count: 1, ids: [dead], more: false });
    expect((await claim()).map((r) => r.id)).toEqual([dead]);
  });

  it('in bulk: requeues the other rows, skips and reports the ones whose key is busy, in every batch size', async () => {
    const { dead: busy, processing } = await deadBehindProcessing('Q', 'orders.paid');
    const [idle, unkeyed] = (await db.store.outbox.insert([
      anOutboxMessage({ key: 'R', topic: 'orders.paid' }),
      anOutboxMessage({ topic: 'orders.paid' }),
    ])) as [RowId, RowId];
    const claimed = (await claim()).filter((r) => r.id === idle || r.id === unkeyed);
    await db.store.outbox.markDead(claimed.map((r) => ({ ...claimOf(r), reason: 'HTTP 410' })));

    const preview = await requeue('outbox', { topic: 'orders.paid' }, { dryRun: true });
    const batches: SqlRequeueResult[] = [];
    for (let more = true; more && batches.length < 10; ) {
      const batch = await requeue('outbox', { topic: 'orders.paid' }, { batchSize: 1 });
      batches.push(batch);
      more = batch.more;
    }

    const skipped = {
      reason: 'key_in_flight',
      count: 1,
      rows: [{ id: busy, key: 'Q', processingId: processing }],
    };
    expect(preview).toEqual({ dryRun: true, count: 2, ids: [idle, unkeyed], more: false, skipped });
    expect(batches.map((b) => b.ids)).toEqual([[idle], [unkeyed], []]);
    expect(batches.at(-1)).toEqual({ dryRun: false, count: 0, ids: [], more: false, skipped });
    expect(await stateOf(busy)).toBe('Dead');
    expect((await claim()).map((r) => r.id)).toEqual([idle, unkeyed]);
  });

  /**
   * A requeue of `dead` beside a claimer that has locked `later` (pending) and is about to move it to processing:
   * once the requeue has answered (or waits for that row lock, as it once did), the claimer moves the row and
   * commits. Answers the requeue.
   */
  async function requeueBesideClaimOf(later: RowId, dead: RowId) {
    const claimer: pg.Client = await db.connect();
    await claimer.query('BEGIN');
    await claimer.query(`SELECT id FROM "${db.schema}".outbox WHERE id = $1 FOR UPDATE`, [later]);
    const requeued = requeue('outbox', { ids: [dead] });
    await untilSettledOrWaiting(requeued, ['tuple', 'transactionid']);
    await claimer.query(
      `UPDATE "${db.schema}".outbox SET state = 'processing', claim_token = gen_random_uuid(),
         lease_until = now() + interval '1 minute' WHERE id = $1`,
      [later],
    );
    await claimer.query('COMMIT');
    return requeued;
  }

  it('does not wait for a claim of the later row that is under way: leaves the dead row dead (key_busy)', async () => {
    const [dead, later] = (await db.store.outbox.insert([
      anOutboxMessage({ key: 'Q' }),
      anOutboxMessage({ key: 'Q' }),
    ])) as [RowId, RowId];
    const [head] = await claim();
    await db.store.outbox.markDead([{ ...claimOf(head as OutboxRow), reason: 'HTTP 500', attempted: true }]);
    const requeued = await requeueBesideClaimOf(later, dead);

    expect(await requeued).toEqual({
      dryRun: false,
      count: 0,
      ids: [],
      more: false,
      keyBusy: { reason: 'key_busy', count: 1, rows: [{ id: dead, key: 'Q' }] },
    });
    expect(await stateOf(dead)).toBe('Dead');
  });

  /** An application's enqueue of `key` between its insert and its commit: a client holding the key's insert lock. */
  async function openWriter(key: string): Promise<pg.Client> {
    const writer: pg.Client = await db.connect();
    await writer.query('BEGIN');
    await writer.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      outboxKeyLockName(db.schema, key),
    ]);
    await writer.query(
      `INSERT INTO "${db.schema}".outbox (topic, key, payload, max_attempts) VALUES ('w', $1, '{}', 3)`,
      [key],
    );
    return writer;
  }

  /** `keys.length` dead rows, one per key in order (each its key's only row: claimed, failed, dead). */
  async function deadRows(keys: readonly (string | undefined)[], topic = 't'): Promise<RowId[]> {
    const ids = await db.store.outbox.insert(keys.map((key) => anOutboxMessage({ topic, key })));
    const claimed = await claim();
    await db.store.outbox.markDead(
      claimed.map((r) => ({ ...claimOf(r), reason: 'HTTP 500', attempted: true })),
    );
    expect(claimed.map((r) => r.id).sort()).toEqual([...ids].sort());
    return ids;
  }

  /** `promise`, or 'still waiting' when it has not settled within `ms`. */
  function within<T>(promise: Promise<T>, ms = 3000): Promise<T | 'still waiting'> {
    return Promise.race([
      promise,
      new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms)),
    ]);
  }

  it('does not wait for a key whose insert lock another transaction holds: leaves its row dead (key_busy)', async () => {
    const [dead] = (await deadRows(['Q'])) as [RowId];
    const writer = await openWriter('Q');

    const requeued = requeue('outbox', { ids: [dead] });
    const answer = await within(requeued);
    await writer.query('COMMIT');
    await requeued;

    expect(answer).toEqual({
      dryRun: false,
      count: 0,
      ids: [],
      more: false,
      keyBusy: { reason: 'key_busy', count: 1, rows: [{ id: dead, key: 'Q' }] },
    });
    expect(await stateOf(dead)).toBe('Dead');
    // Once the writer committed, the key is free: the row is requeued, its key's head again before the new row.
    expect(await requeue('outbox', { ids: [dead] })).toEqual({
      dryRun: false,
      count: 1,
      ids: [dead],
      more: false,
    });
    expect((await claim()).map((r) => r.id)).toEqual([dead]);
  });

  it('never holds up a writer of a key it locked while another key of the batch is busy', async () => {
    // Key "A" sorts before "Q": a requeue that waited for the keys in order would hold A while it waited for Q.
    const [a, q, unkeyed] = (await deadRows(['A', 'Q', undefined], 'orders.paid')) as [RowId, RowId, RowId];
    const writer = await openWriter('Q');

    const requeued = requeue('outbox', { topic: 'orders.paid' });
    await untilSettledOrWaiting(requeued, ['advisory']);
    // Another application enqueues key A meanwhile (the statement `enqueue` runs), giving up after 2 s of waiting.
    const other: pg.Client = await db.connect();
    await other.query("SET lock_timeout = '2s'");
    const enqueue = enqueueOutboxStatement(db.schema, [anOutboxMessage({ topic: 'w', key: 'A' })]);
    const enqueued = await other.query(enqueue.text, [...enqueue.values]).then(
      () => 'enqueued',
      (error: unknown) => String(error),
    );
    const answer = await within(requeued);
    await writer.query('COMMIT');
    await requeued;

    expect(enqueued).toBe('enqueued');
    expect(answer).toEqual({
      dryRun: false,
      count: 2,
      ids: [a, unkeyed],
      more: false,
      keyBusy: { reason: 'key_busy', count: 1, rows: [{ id: q, key: 'Q' }] },
    });
    expect(await stateOf(q)).toBe('Dead');
  });

  it('a batch that requeued nothing while more may remain reports what it left dead', async () => {
    const { dead: inFlight, processing } = await deadBehindProcessing('P', 'orders.paid');
    const [q1, q2] = (await db.store.outbox.insert([
      anOutboxMessage({ topic: 'orders.paid', key: 'Q' }),
      anOutboxMessage({ topic: 'orders.paid', key: 'Q' }),
    ])) as [RowId, RowId];
    for (const id of [q1, q2]) {
      const [row] = await claim();
      if (row?.id !== id) throw new Error(`claimed ${row?.id}, not ${id}`);
      await db.store.outbox.markDead([{ ...claimOf(row), reason: 'HTTP 500', attempted: true }]);
    }
    const writer = await openWriter('Q');

    const answer = await within(requeue('outbox', { topic: 'orders.paid' }, { batchSize: 2 }));
    await writer.query('COMMIT');

    expect(answer).toEqual({
      dryRun: false,
      count: 0,
      ids: [],
      more: true,
      skipped: {
        reason: 'key_in_flight',
        count: 1,
        rows: [{ id: inFlight, key: 'P', processingId: processing }],
      },
      keyBusy: {
        reason: 'key_busy',
        count: 2,
        rows: [
          { id: q1, key: 'Q' },
          { id: q2, key: 'Q' },
        ],
      },
    });
  });

  it('locks only the head of each key (its smallest active id), not the rows behind it', async () => {
    const [head, second, third] = (await db.store.outbox.insert([
      anOutboxMessage({ key: 'Q' }),
      anOutboxMessage({ key: 'Q' }),
      anOutboxMessage({ key: 'Q' }),
    ])) as [RowId, RowId, RowId];
    const [p1, p2] = (await db.store.outbox.insert([
      anOutboxMessage({ key: 'P' }),
      anOutboxMessage({ key: 'P' }),
    ])) as [RowId, RowId];
    // P's head is being delivered: it is locked (a reclaim or settle of it waits), not the pending row behind it.
    expect((await claim()).map((r) => r.id)).toEqual([head, p1]);
    await db.store.outbox.release([claimOf((await db.store.outbox.get(head)) as OutboxRow)]);
    const requeuer: pg.Client = await db.connect();
    const other: pg.Client = await db.connect();
    await requeuer.query('BEGIN');
    const { text, values } = adminLockPendingKeyRowsStatement(db.schema, ['Q', 'P', 'R']);

    const before = await other.query<{ ctid: string }>(
      `SELECT ctid::text AS ctid FROM "${db.schema}".outbox WHERE id = $1`,
      [head],
    );
    const { rows } = await requeuer.query<{ held_key: string }>(text, [...values]);
    const free = await other.query<{ id: string }>(
      `SELECT id::text AS id FROM "${db.schema}".outbox WHERE key IN ('P', 'Q') ORDER BY id FOR UPDATE SKIP LOCKED`,
    );
    await requeuer.query('COMMIT');
    const after = await other.query<{ ctid: string }>(
      `SELECT ctid::text AS ctid FROM "${db.schema}".outbox WHERE id = $1`,
      [head],
    );

    // Both heads locked (no key held elsewhere); Q's, pending, is written too (a new version: see
    // adminLockPendingKeyRowsStatement); P's is processing.
    expect(rows).toEqual([]);
    expect(free.rows.map((r) => r.id)).toEqual([second, third, p2]);
    expect(after.rows[0]?.ctid).not.toBe(before.rows[0]?.ctid);
  });

  it('does not wait for a claim of the head under way, nor lock the next pending row: leaves the dead row dead', async () => {
    const [dead, later, last] = (await db.store.outbox.insert([
      anOutboxMessage({ key: 'Q' }),
      anOutboxMessage({ key: 'Q' }),
      anOutboxMessage({ key: 'Q' }),
    ])) as [RowId, RowId, RowId];
    const [head] = await claim();
    await db.store.outbox.markDead([{ ...claimOf(head as OutboxRow), reason: 'HTTP 500', attempted: true }]);

    const requeued = await requeueBesideClaimOf(later, dead);

    expect(await requeued).toMatchObject({ count: 0, keyBusy: { rows: [{ id: dead, key: 'Q' }] } });
    expect(await stateOf(dead)).toBe('Dead');
    expect(await stateOf(last)).toBe('Pending');
  });
});

describe('admin requeue racing a claim whose snapshot predates it', () => {
  const db = useTestStore('pg_requeue_race', { url: testPostgresUrl(), storePoolSize: 4 });
  let executor: SqlExecutor;
  beforeAll(() => {
    executor = createPgExecutor(testPool(2));
  });
  afterAll(async () => {
    await executor.close();
  });

  it('never lets the claim take the next row of the key while the requeued row is pending again', async () => {
    // Prepare: 600 keys with one row each, due tomorrow, so every claim walks them (tens of milliseconds) before it
    // reaches the test's key, which sorts last. Found from outside: a claim whose snapshot saw the requeued row X
    // still dead took Y, the next row of X's key, after the requeue committed; the next claim took X beside it.
    await db.pool.query(
      `INSERT INTO "${db.schema}".outbox (topic, key, payload, max_attempts, scheduled_at)
       SELECT 't', 'a' || lpad(g::text, 5, '0'), '{}', 3, now() + interval '1 day' FROM generate_series(1, 600) g`,
    );
    await db.pool.query(`ANALYZE "${db.schema}".outbox`);
    const violations: string[] = [];
    // Act: 30 rounds of a claim and a requeue started together, the requeue 0-20 ms later.
    for (let round = 0; round < 30; round++) {
      const key = `z${String(round).padStart(3, '0')}`;
      const [x, y] = (await db.store.outbox.insert([
        anOutboxMessage({ key, payload: { n: 1 } }),
        anOutboxMessage({ key, payload: { n: 2 } }),
      ])) as [RowId, RowId];
      await db.pool.query(`UPDATE "${db.schema}".outbox SET state = 'dead' WHERE id = $1`, [x]);
      // A claim of its own each round: its key walk starts at the smallest key, so it walks the 600 first.
      const claiming = createOutboxClaim({ executor, schema: db.schema })({
        batchSize: 10,
        leaseMs: LEASE_MS,
      });
      await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 20)));
      await db.store.admin.requeue('outbox', { ids: [x] });
      const claimed = await claiming;
      const xState = await stateOf(x);
      if (claimed.some((r) => r.id === y) && xState === 'Pending')
        violations.push(`${key}: ${y} before ${x}`);
      // The key is done with either way.
      await db.pool.query(`UPDATE "${db.schema}".outbox SET state = 'sent' WHERE id = ANY ($1::bigint[])`, [
        [x, y],
      ]);
    }
    // Assess
    expect(violations).toEqual([]);
  });

  const stateOf = async (id: RowId) => (await db.store.outbox.get(id))?.state;
});
