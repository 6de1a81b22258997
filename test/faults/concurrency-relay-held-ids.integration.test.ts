/**
 * A crashed relay that holds more aggregate ids than one claim may skip (`MAX_SKIPPED_AGGREGATES`, 100; a relay's
 * batch holds up to `inbox.relay.batchSize` ids, at most 1000): the later rows of the held ids beyond those 100 can
 * fill the window of every claim, and then the other ids' rows wait for the crashed relay's lease (the relay's
 * README, "A crashed relay"). The wait is bounded by that lease: once the reclaim step returns the held rows, the
 * same drain forwards every row, each aggregate id in id order.
 */
import { randomBytes } from 'node:crypto';
import type { RowId, Store } from '@queuebox/core';
import { createRelay, type Sources } from '@queuebox/inbox';
import { createPgExecutor, createPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

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

async function idsIn(state: string): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT i.id::text AS id FROM "${schema}".inbox i WHERE i.state = $1 ORDER BY i.id`,
    [state],
  );
  return rows.map((r) => r.id);
}

describe('a relay behind a crashed relay that holds more ids than a claim may skip', () => {
  it("forwards every row, the held ids' in id order, once the crashed relay's lease is reclaimed", async () => {
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

    // Act: a drain while the lease runs (the other ids' rows wait: every window is full of held ids' rows), then
    // the lease expires and the next drain's reclaim step returns the held rows.
    const during = await relay.drain({ deadline: Date.now() + 1500 });
    expect(await idsIn('processing')).toEqual(heads);
    await pool.query(
      `UPDATE "${schema}".inbox SET lease_until = now() - interval '1 second' WHERE id = ANY ($1::bigint[])`,
      [heads],
    );
    const after = await relay.drain({ deadline: Date.now() + 20_000 });

    // Assess: everything forwarded once, each id's rows in id order.
    expect(after.reclaimed.returned).toBe(150);
    expect(during.forwarded + after.forwarded).toBe(455);
    expect(await idsIn('pending')).toEqual([]);
    expect(await idsIn('processing')).toEqual([]);
    const { rows } = await pool.query<{ key: string; inbox_ids: string[] }>(
      `SELECT key, array_agg(headers->>'x-inbox-id' ORDER BY id) AS inbox_ids FROM "${schema}".outbox GROUP BY key`,
    );
    expect(rows).toHaveLength(155);
    for (const row of rows) {
      const ids = row.inbox_ids.map(Number);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
    }
    expect(
      rows
        .filter((r) => r.key.startsWith('z'))
        .flatMap((r) => r.inbox_ids)
        .sort((a, b) => Number(a) - Number(b)),
    ).toEqual(others);
  });
});
