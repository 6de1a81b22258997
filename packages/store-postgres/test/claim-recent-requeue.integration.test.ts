/**
 * The claim's `recent` step (the newest rows read for due keyed heads the walk could not reach) against a requeue
 * that commits between the claim's snapshot and its row locks: per-key order holds. The requeue makes the dead head
 * X of key z pending again; the claim's snapshot saw X dead and Y, behind it, as z's head. Unlike the walk, `recent`
 * does not check the row version it read: it holds because the requeue rewrites z's pending head (Y), so the claim's
 * locked re-check of Y no longer matches (a review of this session's claim change forced the race with a sleep).
 */
import { randomUUID } from 'node:crypto';
import type { RowId } from '@queuebox/core';
import { testPostgresUrl, useTestStore } from '@queuebox/testing';
import { expect, it } from 'vitest';
import { claimOutboxStatement } from '../src/outbox-claim.ts';
import { anOutboxMessage } from './messages.ts';

const db = useTestStore('pg_claim_recent_requeue', { url: testPostgresUrl(), storePoolSize: 4 });

it('never has a key head Y in flight while a requeue made the smaller id X of its key pending', async () => {
  // Prepare: 5 keys whose head is due tomorrow and a walk bound of 3, so the walk comes back short and `recent` runs;
  // key z: X dead, Y pending behind it.
  await db.pool.query(
    `INSERT INTO "${db.schema}".outbox (topic, key, payload, max_attempts, scheduled_at)
     SELECT 't', 'a' || g, '{}', 3, now() + interval '1 day' FROM generate_series(1, 5) g`,
  );
  const [x, y] = (await db.store.outbox.insert([
    anOutboxMessage({ key: 'z', payload: { n: 1 } }),
    anOutboxMessage({ key: 'z', payload: { n: 2 } }),
  ])) as [RowId, RowId];
  await db.pool.query(`UPDATE "${db.schema}".outbox SET state = 'dead' WHERE id = $1`, [x]);
  const statement = claimOutboxStatement(db.schema, {
    batchSize: 10,
    unkeyedReserve: 5,
    startAfterKey: null,
    keyScanLimit: 3,
    leaseMs: 60_000,
    claimToken: randomUUID(),
  });
  // The claim sleeps 300 ms after its snapshot, before `recent` locks its rows.
  const gate = 'AND (SELECT pg_catalog.count(*) FROM walk) >= $4::int';
  expect(statement.text).toContain(gate);
  const slowed = statement.text.replace(gate, `${gate} AND (SELECT pg_catalog.pg_sleep(0.3)) IS NOT NULL`);
  const claimer = await db.connect(); // ended after the file

  // Act: the requeue of X commits while the claim sleeps
  const claiming = claimer.query<{ id: string | null }>(slowed, statement.values as unknown[]);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const requeued = await db.store.admin.requeue('outbox', { ids: [x] });
  const first = (await claiming).rows.filter((r) => r.id !== null).map((r) => String(r.id));
  const next = (await db.store.outbox.claim({ batchSize: 10, leaseMs: 60_000 })).map((r) => String(r.id));

  // Assess: X requeued; Y not claimed before X (the next claim takes X, z's head again)
  expect(requeued.ids).toEqual([x]);
  expect(first).not.toContain(String(y));
  expect(next).toEqual([String(x)]);
});
