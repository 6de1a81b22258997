/**
 * Crashed relays that hold aggregate ids: a relay's claim skips the ids whose earlier rows are held
 * (`skipAggregatesOf`), at most `MAX_SKIPPED_AGGREGATES` (1000, the largest `inbox.relay.batchSize`, so one crashed
 * relay's batch is always covered). Within that bound the other ids' rows are forwarded while the crashed relay's
 * lease runs (at the old bound of 100, a crashed batch of 150 ids held them back for the whole lease). Beyond it —
 * several crashed relays holding more ids together — the later rows of the ids a claim cannot skip can fill the
 * window of every claim, and then the other ids' rows wait for the lease (the relay's README, "A crashed relay").
 * Either way, once the reclaim step returns the held rows, the same drain forwards every row, each aggregate id in
 * id order.
 */
import { randomBytes } from 'node:crypto';
import { MAX_SKIPPED_AGGREGATES, type RowId, type Store } from '@queuebox/core';
import { createRelay, type Sources } from '@queuebox/inbox';
import { createPgExecutor, createPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

const schema = `t_relay_held_${randomBytes(4).toString('hex')}`;
dropSchemasAfterPass(() => [schema]);
const sources: Sources = { s: { type: 'http', topic: 'held.{{ source }}' } };
let store: Store;
let crashed: Store;
const pool = testPool(2);

beforeAll(async () => {
  store = createPostgresStore({ executor: createPgExecutor(testPool(4)), schema });
  crashed = createPostgresStore({ executor: createPgExecutor(testPool(1)), schema });
  await store.migrate();
});
afterAll(async () => {
  await Promise.all([store.close(), crashed.close(), pool.end()]);
});
beforeEach(async () => {
  await pool.query(`DELETE FROM "${schema}".inbox`);
  await pool.query(`DELETE FROM "${schema}".outbox`);
});

let n = 0;
async function storeRow(aggregateId: string | null): Promise<RowId> {
  n += 1;
  const result = await store.inbox.store({
    source: 's',
    idempotencyKey: `m-${n}`,
    aggregateId,
    payload: { n },
    maxAttempts: 5,
  });
  return result.id;
}

/** `count` pending rows of source s, one per aggregate id `${prefix}0` …, in that order (ids ascending). */
async function storeRowsOfIds(prefix: string, count: number): Promise<RowId[]> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO "${schema}".inbox (source, idempotency_key, aggregate_id, payload, max_attempts)
     SELECT 's', $1 || '-' || g || '-' || $2, $1 || g, jsonb_build_object('g', g), 5
     FROM generate_series(0, $3::int - 1) AS g ORDER BY g
     RETURNING id::text AS id`,
    [prefix, randomBytes(4).toString('hex'), count],
  );
  return rows.map((r) => r.id).sort((a, b) => Number(a) - Number(b));
}

/** Every outbox row's key and inbox id, per key in outbox id order; each key's inbox ids must ascend. */
async function forwardedInOrder(): Promise<Map<string, number[]>> {
  const { rows } = await pool.query<{ key: string; inbox_ids: string[] }>(
    `SELECT key, array_agg(headers->>'x-inbox-id' ORDER BY id) AS inbox_ids FROM "${schema}".outbox GROUP BY key`,
  );
  const byKey = new Map(rows.map((r) => [r.key, r.inbox_ids.map(Number)]));
  for (const ids of byKey.values()) expect(ids).toEqual([...ids].sort((a, b) => a - b));
  return byKey;
}

async function expireLeases(ids: readonly RowId[]): Promise<void> {
  await pool.query(
    `UPDATE "${schema}".inbox SET lease_until = now() - interval '1 second' WHERE id = ANY ($1::bigint[])`,
    [ids],
  );
}

async function idsIn(state: string): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT i.id::text AS id FROM "${schema}".inbox i WHERE i.state = $1 ORDER BY i.id`,
    [state],
  );
  return rows.map((r) => r.id);
}

describe('a relay behind a crashed relay that holds more ids than the old bound of 100', () => {
  it("forwards the other ids' rows while the lease runs, then every held row, each id in id order", async () => {
    // Prepare: a crashed relay (batch 150) holds the first row of 150 ids; each id has 2 later rows (300 rows, three
    // windows of 100), then 5 rows of other ids.
    const heads: RowId[] = [];
    for (let i = 0; i < 150; i += 1) heads.push(await storeRow(`h${i}`));
    const held = await crashed.inbox.claimForRelay({ sources: ['s'], batchSize: 150, leaseMs: 600_000 });
    expect(held.map((r) => r.id)).toEqual(heads);
    for (let round = 0; round < 2; round += 1) for (let i = 0; i < 150; i += 1) await storeRow(`h${i}`);
    const others: RowId[] = [];
    for (let i = 0; i < 5; i += 1) others.push(await storeRow(`z${i}`));
    const relay = createRelay({ store: store.inbox, sources, fillMs: 0, reclaimIntervalMs: 0 });

    // Act: a drain while the lease runs: its claims skip the 100 ids of the first window, then all 150, and reach
    // the other ids' rows. Then the lease expires and the next drain's reclaim step returns the held rows.
    const during = await relay.drain({ deadline: Date.now() + 1500 });
    const beforeTheLease = await forwardedInOrder();
    expect(await idsIn('processing')).toEqual(heads);
    await expireLeases(heads);
    const after = await relay.drain({ deadline: Date.now() + 20_000 });

    // Assess: the other ids' rows went during the lease (before, at most 100 held ids were skipped, every window
    // was full of the other 50 ids' rows and they waited for the lease); then everything forwarded once, in order.
    expect(during.forwarded).toBe(5);
    expect(
      [...beforeTheLease.values()]
        .flat()
        .sort((a, b) => a - b)
        .map(String),
    ).toEqual(others);
    expect(after.reclaimed.returned).toBe(150);
    expect(during.forwarded + after.forwarded).toBe(455);
    expect(await idsIn('pending')).toEqual([]);
    expect(await idsIn('processing')).toEqual([]);
    const byKey = await forwardedInOrder();
    expect(byKey.size).toBe(155);
    expect(byKey.get('h0')?.map(String)).toEqual([heads[0], expect.any(String), expect.any(String)]);
  });
});

describe('relays behind crashed relays that hold more ids than a claim may skip (MAX_SKIPPED_AGGREGATES)', () => {
  it("forwards every row, the held ids' in id order, once the crashed relays' lease is reclaimed", async () => {
    // Prepare: two crashed relays (batches of 1000 and 100) hold the first rows of 1100 ids; each id has one later
    // row (1100 rows: after the claims skip 1000 ids, the other 100 ids' rows still fill a window of 100), then 5
    // rows of other ids.
    expect(MAX_SKIPPED_AGGREGATES).toBe(1000);
    const count = MAX_SKIPPED_AGGREGATES + 100;
    const heads = await storeRowsOfIds('h', count);
    const first = await crashed.inbox.claimForRelay({ sources: ['s'], batchSize: 1000, leaseMs: 600_000 });
    const second = await crashed.inbox.claimForRelay({ sources: ['s'], batchSize: 100, leaseMs: 600_000 });
    expect([...first, ...second].map((r) => r.id)).toEqual(heads);
    const later = await storeRowsOfIds('h', count);
    const others: RowId[] = [];
    for (let i = 0; i < 5; i += 1) others.push(await storeRow(`z${i}`));
    const relay = createRelay({
      store: store.inbox,
      sources,
      fillMs: 0,
      reclaimIntervalMs: 0,
      blockedPauseMaxMs: 50,
    });

    // Act: a drain while the lease runs (the other ids' rows wait: once 1000 ids are skipped, every window is full
    // of the other 100 held ids' rows), then the lease expires and the next drains' reclaim steps return the held
    // rows (at most 1000 per drain: the first drain forwards all but the rows of the ids still held, the next the
    // rest).
    const during = await relay.drain({ deadline: Date.now() + 1500 });
    expect(during.forwarded).toBe(0);
    expect(await idsIn('processing')).toEqual(heads);
    await expireLeases(heads);
    const after = { returned: 0, forwarded: 0 };
    for (let drain = 0; drain < 4 && (await idsIn('pending')).length > 0; drain += 1) {
      const report = await relay.drain({ deadline: Date.now() + 3000 });
      after.returned += report.reclaimed.returned;
      after.forwarded += report.forwarded;
    }

    // Assess: everything forwarded once, each id's rows in id order.
    expect(after).toEqual({ returned: count, forwarded: 2 * count + 5 });
    expect(await idsIn('pending')).toEqual([]);
    expect(await idsIn('processing')).toEqual([]);
    const byKey = await forwardedInOrder();
    expect(byKey.size).toBe(count + 5);
    expect(byKey.get('h0')).toEqual([Number(heads[0]), Number(later[0])]);
    expect(
      [...byKey.entries()]
        .filter(([key]) => key.startsWith('z'))
        .flatMap(([, ids]) => ids)
        .sort((a, b) => a - b)
        .map(String),
    ).toEqual(others);
  });
});
