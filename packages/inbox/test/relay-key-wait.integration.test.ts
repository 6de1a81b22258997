/**
 * A forward that waits for outbox key locks an application's open transaction holds says how long (PostgreSQL):
 * the store's forward report and the relay's drain report carry `keyWaitMs`, which the local runtime and relay-tick
 * log as a warning from a second on. An application transaction enqueues a row of key K and stays open 1.5 s; the
 * relay's forward of a row of K waits for it (its key locks come before the forward's ids, see the store's
 * `withOutboxKeyLocks`). Before, nothing said so: an operator saw only an advisory-lock wait in pg_stat_activity.
 */
import { randomUUID } from 'node:crypto';
import type { NewInboxMessage } from '@queuebox/core';
import { createPgExecutor, createPostgresOutboxStore } from '@queuebox/store-postgres';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createRelay, type Sources } from '../src/index.ts';

const db = useTestStore('relay_key_wait', { poolSize: 3, storePoolSize: 4 });

/** How long the application transaction stays open after its enqueue. */
const HOLD_MS = 1_500;

const aMessage = (source: string, aggregateId: string): NewInboxMessage => ({
  source,
  idempotencyKey: randomUUID(),
  eventType: 'order.created',
  aggregateId,
  correlationId: null,
  payload: { order: 1 },
  headers: {},
  maxAttempts: 5,
});

/**
 * An application transaction (BEGIN, the store's keyed insert, as `enqueue` writes it) that enqueues a row of `key`
 * and commits `HOLD_MS` after its insert; resolves once the insert ran (the key's lock held), with its commit.
 */
async function openApplicationTransaction(key: string): Promise<{ committed: Promise<void> }> {
  const executor = createPgExecutor(db.pool);
  let inserted = () => {};
  const ready = new Promise<void>((resolve) => {
    inserted = resolve;
  });
  const committed = executor.transaction(async (tx) => {
    await createPostgresOutboxStore({ executor: tx, schema: db.schema }).insert([
      { topic: `app.${key}`, key, payload: { by: 'application' }, maxAttempts: 3 },
    ]);
    inserted();
    await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
  });
  await Promise.race([ready, committed]);
  return { committed };
}

describe('a forward held by an open application transaction of its key', () => {
  it("reports the store forward's wait as keyWaitMs, and none for a forward nobody held", async () => {
    // Prepare: two claimed rows, of keys K (held by the application) and L (free).
    const source = `push_${randomUUID().slice(0, 8)}`;
    const [k, l] = [`k-${randomUUID()}`, `l-${randomUUID()}`];
    await db.store.inbox.store(aMessage(source, k));
    await db.store.inbox.store(aMessage(source, l));
    const claimed = await db.store.inbox.claimForRelay({ sources: [source], batchSize: 10, leaseMs: 60_000 });
    expect(claimed).toHaveLength(2);
    const item = (aggregateId: string) => {
      const row = claimed.find((r) => r.aggregateId === aggregateId);
      return {
        id: row?.id ?? '',
        claimToken: row?.claimToken ?? '',
        outbox: { topic: `relayed.${aggregateId}`, key: aggregateId, headers: {}, maxAttempts: 3 },
      };
    };
    const free = await db.store.inbox.forward([item(l)]);
    const app = await openApplicationTransaction(k);

    // Act
    const started = Date.now();
    const held = await db.store.inbox.forward([item(k)]);
    const tookMs = Date.now() - started;
    await app.committed;

    // Assess: the held forward waited for the application's commit and says so; the free one did not wait.
    expect(free.settled).toHaveLength(1);
    expect(free.keyWaitMs).toBeUndefined();
    expect(held.settled).toHaveLength(1);
    expect(tookMs).toBeGreaterThanOrEqual(1_000);
    expect(held.keyWaitMs).toBeGreaterThanOrEqual(1_000);
    expect(held.keyWaitMs).toBeLessThanOrEqual(tookMs + 1);
  });

  it("reports the longest wait of a drain's forwards as the drain report's keyWaitMs", async () => {
    // Prepare
    const source = `push_${randomUUID().slice(0, 8)}`;
    const sources: Sources = { [source]: { type: 'http', topic: 'relayed.{{ source }}' } };
    const relay = createRelay({ store: db.store.inbox, sources, chainMs: 0 });
    const k = `k-${randomUUID()}`;
    await db.store.inbox.store(aMessage(source, `free-${randomUUID()}`));
    const free = await relay.drain({ deadline: Date.now() + 60_000 });
    await db.store.inbox.store(aMessage(source, k));
    const app = await openApplicationTransaction(k);

    // Act
    const held = await relay.drain({ deadline: Date.now() + 60_000 });
    await app.committed;

    // Assess
    expect(free).toMatchObject({ forwarded: 1, stoppedFor: 'empty' });
    expect(free.keyWaitMs).toBeUndefined();
    expect(held).toMatchObject({ forwarded: 1, stoppedFor: 'empty' });
    expect(held.keyWaitMs).toBeGreaterThanOrEqual(1_000);
  });
});
