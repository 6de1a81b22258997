/**
 * Per-key order across concurrent application transactions, on a real PostgreSQL. Ids come from an identity,
 * drawn at insert time; without the key lock a transaction that inserted first (smaller id) could commit after
 * one that inserted later, and the outbox would deliver by id, not in commit order.
 */
import { randomUUID } from 'node:crypto';
import { useTestStore } from '@queuebox/testing';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { enqueue, enqueueMany } from '../src/enqueue.ts';

const db = useTestStore('client_order', { poolSize: 4, storePoolSize: 2 });
const options = () => ({ schema: db.schema });

/**
 * Resolves once the backend `pid` waits for a lock (pg_stat_activity), polling; stops polling when `done` says
 * so. No deadline: the test's own timeout bounds it.
 */
async function waitingOnLock(pid: number, done: () => boolean): Promise<'blocked' | 'gone'> {
  for (;;) {
    if (done()) return 'gone';
    const { rows } = await db.pool.query<{ wait_event_type: string | null; wait_event: string | null }>(
      'SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = $1',
      [pid],
    );
    if (rows[0]?.wait_event_type === 'Lock' && rows[0]?.wait_event === 'advisory') return 'blocked';
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function backendPid(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]?.pid ?? -1;
}

/** Claims and sends rows as the poller would (one head per key at a time); answers the payloads of `topic`. */
async function deliveryOrder(topic: string, expected: number): Promise<unknown[]> {
  const delivered: unknown[] = [];
  while (delivered.length < expected) {
    const batch = await db.store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    if (batch.length === 0) throw new Error(`only ${delivered.length} of ${expected} rows were claimable`);
    for (const row of batch) {
      if (row.topic === topic) delivered.push(row.payload);
      await db.store.outbox.markSent([{ id: row.id, claimToken: row.claimToken ?? '', destination: 'test' }]);
    }
  }
  return delivered;
}

describe('per-key order of concurrent application transactions', () => {
  it('gives ids in commit order when the transaction that inserted first commits last', async () => {
    // Prepare: two application connections; A inserts first and keeps its transaction open.
    const key = `order-${randomUUID()}`;
    const topic = `ordering.${key}`;
    const a = await db.connect();
    const b = await db.connect();
    const bPid = await backendPid(b);
    await a.query('BEGIN');
    const idA = await enqueue(a, { topic, key, payload: 'A' }, options());

    // Act: B enqueues the same key and commits as soon as it can; A commits only after B has committed or
    // is seen waiting for A.
    await b.query('BEGIN');
    let bCommitted = false;
    const bDone = (async () => {
      const id = await enqueue(b, { topic, key, payload: 'B' }, options());
      await b.query('COMMIT');
      bCommitted = true;
      return id;
    })();
    const bBefore = await Promise.race([
      bDone.then(() => 'committed' as const),
      waitingOnLock(bPid, () => bCommitted),
    ]);
    await a.query('COMMIT');
    const idB = await bDone;

    // Assess: B either committed before A (the bug) or waited for A's commit (the lock), so the commit order is
    // known; ids must grow in it, and the claim must deliver in it.
    const commitOrder =
      bBefore === 'committed'
        ? [
            ['B', idB],
            ['A', idA],
          ]
        : [
            ['A', idA],
            ['B', idB],
          ];
    const idsInCommitOrder = commitOrder.map(([, id]) => id);
    expect(idsInCommitOrder).toEqual([idA, idB].sort((x, y) => Number(BigInt(x) - BigInt(y))));
    expect(bBefore).toBe('blocked');
    expect(await deliveryOrder(topic, 2)).toEqual(commitOrder.map(([name]) => name));
  });

  it('lets writers of other keys go on while a key is locked', async () => {
    const topic = `ordering.${randomUUID()}`;
    const a = await db.connect();
    const b = await db.connect();
    await a.query('BEGIN');
    await enqueue(a, { topic, key: 'k1', payload: 'A' }, options());
    // B's transaction completes while A still holds k1; were it blocked, this await would never return.
    await b.query('BEGIN');
    await enqueue(b, { topic, key: 'k2', payload: 'B' }, options());
    await enqueue(b, { topic, payload: 'unkeyed' }, options());
    await b.query('COMMIT');
    await a.query('COMMIT');
    expect((await db.outboxRows(topic)).map((r) => r.payload)).toEqual(['A', 'B', 'unkeyed']);
  });

  it('does not deadlock two enqueueMany calls that name the same keys in opposite orders', async () => {
    // Prepare: C holds x; A (x, y) queues for x; B (y, x) would take y and queue for x. When C commits, A gets x
    // and needs y — held by B, who waits for A: a deadlock, unless both take their keys in one order.
    const topic = `ordering.${randomUUID()}`;
    const [a, b, c] = [await db.connect(), await db.connect(), await db.connect()];
    const [aPid, bPid] = [await backendPid(a), await backendPid(b)];
    await c.query('BEGIN');
    await enqueue(c, { topic, key: 'x', payload: 'C-x' }, options());
    await a.query('BEGIN');
    await b.query('BEGIN');
    const run = (client: pg.Client, name: string, keys: string[]) => {
      const state = { done: false };
      const promise = enqueueMany(
        client,
        keys.map((key) => ({ topic, key, payload: `${name}-${key}` })),
        options(),
      )
        .then(() => client.query('COMMIT'))
        .finally(() => {
          state.done = true;
        });
      return { state, promise };
    };
    // Act
    const runA = run(a, 'A', ['x', 'y']);
    expect(await waitingOnLock(aPid, () => runA.state.done)).toBe('blocked');
    const runB = run(b, 'B', ['y', 'x']);
    expect(await waitingOnLock(bPid, () => runB.state.done)).toBe('blocked');
    await c.query('COMMIT');
    // Assess: both commit (a deadlock would reject one of them with SQLSTATE 40P01)
    await Promise.all([runA.promise, runB.promise]);
    const rows = await db.outboxRows(topic);
    expect(rows.map((r) => r.payload)).toEqual(['C-x', 'A-x', 'A-y', 'B-y', 'B-x']);
  });
});
