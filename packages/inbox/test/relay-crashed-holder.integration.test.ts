/**
 * A crashed relay must not stall a whole source for its lease (PostgreSQL, two stores on one schema as two relays):
 * the rows a crashed relay claimed stay processing until their lease expires (`claimTimeoutMs`, 5 minutes by
 * default), and the later rows of their aggregate ids wait, as the order of each id requires. Those later rows are
 * the oldest pending ones, so they fill the relay claim's window (the first `batchSize` due rows of the source); the
 * claim reports the rows holding them back (`blockedBy`), and the relay's next claim skips those ids
 * (`skipAggregatesOf`) to reach the other ids' rows. Once the lease is reclaimed, the held ids are claimed again,
 * in id order.
 */
import type { InboxStore, RowId, Store } from '@queuebox/core';
import { createPgExecutor, createPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRelay, type Sources } from '../src/index.ts';

const schema = freshSchemaName('inbox_relay_crashed');
dropSchemasAfterPass(() => [schema]);

const sources: Sources = { s: { type: 'http', topic: 'crash.{{ source }}' } };
let stores: [Store, Store];
/** The crashed relay's store: it claims and never forwards. */
let crashed: Store;
const pool = testPool(2);

beforeAll(async () => {
  stores = [
    createPostgresStore({ executor: createPgExecutor(testPool(4)), schema }),
    createPostgresStore({ executor: createPgExecutor(testPool(4)), schema }),
  ];
  crashed = createPostgresStore({ executor: createPgExecutor(testPool(1)), schema });
  await stores[0].migrate();
});
afterAll(async () => {
  await Promise.all([...stores.map((s) => s.close()), crashed.close(), pool.end()]);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function sql<R>(text: string, values: unknown[] = []): Promise<R[]> {
  return (await pool.query(text, values)).rows as R[];
}

let n = 0;
/** Stores one row of source `s` and `aggregateId`; answers its id. */
async function storeRow(aggregateId: string | null): Promise<RowId> {
  n += 1;
  const result = await stores[0].inbox.store({
    source: 's',
    idempotencyKey: `m-${n}`,
    aggregateId,
    payload: { n },
    maxAttempts: 5,
  });
  return result.id;
}

async function storeRows(aggregateId: string | null, count: number): Promise<RowId[]> {
  const ids: RowId[] = [];
  for (let i = 0; i < count; i += 1) ids.push(await storeRow(aggregateId));
  return ids;
}

/** The crashed relay claims the first `count` due rows (lease 10 minutes) and is gone. */
async function crash(count: number): Promise<RowId[]> {
  const held = await crashed.inbox.claimForRelay({ sources: ['s'], batchSize: count, leaseMs: 600_000 });
  return held.map((r) => r.id);
}

/** Per outbox key, the inbox ids its rows were forwarded from, in outbox id order. */
async function forwardedOrder(): Promise<Map<string, number[]>> {
  const rows = await sql<{ key: string | null; inbox_ids: string[] }>(
    `SELECT key, array_agg(headers->>'x-inbox-id' ORDER BY id) AS inbox_ids
     FROM "${schema}".outbox GROUP BY key ORDER BY key`,
  );
  return new Map(rows.map((r) => [r.key ?? '', r.inbox_ids.map(Number)]));
}

/** The inbox rows in state `state`, by id. */
async function idsIn(state: string): Promise<RowId[]> {
  const rows = await sql<{ id: string }>(
    `SELECT i.id::text AS id FROM "${schema}".inbox i WHERE i.state = $1 ORDER BY i.id`,
    [state],
  );
  return rows.map((r) => r.id);
}

/** What the crashed relay's lease expiring and a relay's reclaim step do. */
async function expireAndReclaim(ids: readonly RowId[]): Promise<void> {
  await sql(
    `UPDATE "${schema}".inbox SET lease_until = now() - interval '1 second' WHERE id = ANY($1::bigint[])`,
    [ids],
  );
  await stores[1].inbox.reclaimExpired(['s']);
}

/** Per key, how many of its outbox rows come after a row forwarded from a later inbox row. */
function inversions(order: Map<string, number[]>): Record<string, number> {
  return Object.fromEntries(
    [...order].map(([key, inboxIds]) => [
      key,
      inboxIds.filter((id, i) => inboxIds.slice(0, i).some((before) => before > id)).length,
    ]),
  );
}

describe('a relay behind a crashed relay', () => {
  beforeEach(async () => {
    await sql(`DELETE FROM "${schema}".inbox`);
    await sql(`DELETE FROM "${schema}".outbox`);
  });

  it('finds many held ids, each with a full window of rows, without a pause per id, and keeps them across drains', async () => {
    // Prepare: the crashed relay holds the first row of each of 12 ids; each id has 10 later rows (a whole window of
    // 10), then 5 rows of other ids. Found from outside: each claim's window held the next id's rows, so the skip
    // list grew by one id per claim with a pause after each, and every drain started from nothing again.
    const heads: RowId[] = [];
    for (let i = 0; i < 12; i += 1) heads.push(...(await storeRows(`h${i}`, 1)));
    expect(await crash(12)).toEqual(heads);
    for (let i = 0; i < 12; i += 1) await storeRows(`h${i}`, 10);
    const others: RowId[] = [];
    for (let i = 0; i < 5; i += 1) others.push(await storeRow(`z${i}`));
    const relay = createRelay({
      store: stores[0].inbox,
      sources,
      inbox: { relay: { batchSize: 10 } },
      fillMs: 0,
    });

    // Act: two drains of 4 s each, as the local loop runs them.
    const first = await relay.drain({ deadline: Date.now() + 4000 });
    const second = await relay.drain({ deadline: Date.now() + 1500 });

    // Assess: the other ids' rows went in the first drain; the held ids' rows wait, in order, for the lease.
    expect(first).toMatchObject({ forwarded: 5 });
    expect(second).toMatchObject({ forwarded: 0 });
    expect(await idsIn('processed')).toEqual(others);
    expect(await idsIn('processing')).toEqual(heads);
  });

  it("forwards the other ids' rows within its drain while a full window of one id waits for the crashed lease", async () => {
    // Prepare: the crashed relay holds x1; 100 more rows of x (a whole window of 100), then 50 rows of ten other ids.
    const [x1] = await storeRows('x', 1);
    expect(await crash(1)).toEqual([x1]);
    const xs = await storeRows('x', 100);
    const others: RowId[] = [];
    for (let i = 0; i < 50; i += 1) others.push(await storeRow(`y${i % 10}`));
    let claims = 0;
    const counting: InboxStore = {
      ...stores[0].inbox,
      claimForRelay: (claim) => {
        claims += 1;
        return stores[0].inbox.claimForRelay(claim);
      },
      forwardAndClaim: (items, claim) => {
        claims += 1;
        return stores[0].inbox.forwardAndClaim(items, claim);
      },
    };
    const relay = createRelay({ store: counting, sources, fillMs: 0 });

    // Act: one drain of 3 s (the reproduction: it claimed nothing, every claim `blocked: 100`).
    const report = await relay.drain({ deadline: Date.now() + 3000 });

    // Assess: the other ids' rows went; x's wait behind x1, which is still the crashed relay's; the claims that
    // found nothing more paused (at most 1 s each), so a stuck drain claims a handful of times, not hundreds.
    expect(report).toMatchObject({ forwarded: 50, stoppedFor: 'time' });
    expect(await idsIn('processed')).toEqual(others);
    expect(await idsIn('processing')).toEqual([x1]);
    expect(await idsIn('pending')).toEqual(xs);
    expect(claims).toBeLessThan(20);
  });

  it("claims the held id's rows in id order once the crashed relay's lease is reclaimed, within the same drain", async () => {
    const [x1] = await storeRows('x', 1);
    expect(await crash(1)).toEqual([x1]);
    const xs = await storeRows('x', 150);
    const ys = await storeRows('y', 30);
    const relay = createRelay({ store: stores[0].inbox, sources, fillMs: 0 });

    // Act: the relay drains; 700 ms in, x1's lease expires and another relay's reclaim step returns it to pending.
    const drained = relay.drain({ deadline: Date.now() + 5000 });
    await sleep(700);
    const yForwardedBeforeReclaim = (await idsIn('processed')).length;
    await expireAndReclaim([x1 as string]);
    const report = await drained;

    // Assess: y's rows went while x waited; then x1 and every later row of x, in id order.
    expect(yForwardedBeforeReclaim).toBe(ys.length);
    expect(report.forwarded).toBe(1 + xs.length + ys.length);
    const order = await forwardedOrder();
    expect(order.get('x')).toEqual([x1, ...xs].map(Number));
    expect(order.get('y')).toEqual(ys.map(Number));
  });

  it("reclaims the crashed relay's lease itself while it waits for the held id, and forwards the id within the drain", async () => {
    // Prepare: the crashed relay holds x1 with a 1 s lease (a runtime restarted after a crash meets its own earlier
    // claims so); x has 5 more rows. An outside soak: the reclaim ran only at a drain's start, so a drain that began
    // before the lease ran out waited for x until its deadline, and only the next drain returned x1.
    const [x1] = await storeRows('x', 1);
    const held = await crashed.inbox.claimForRelay({ sources: ['s'], batchSize: 1, leaseMs: 1_000 });
    expect(held.map((r) => r.id)).toEqual([x1]);
    const xs = await storeRows('x', 5);
    const relay = createRelay({ store: stores[0].inbox, sources, fillMs: 0 });

    // Act: one drain of 10 s, begun while x1's lease still runs.
    const report = await relay.drain({ deadline: Date.now() + 10_000 });

    // Assess: x1 reclaimed by this drain, then x forwarded in id order, and the drain ended for want of work.
    expect(report).toMatchObject({
      reclaimed: { returned: 1 },
      forwarded: 1 + xs.length,
      stoppedFor: 'empty',
    });
    expect((await forwardedOrder()).get('x')).toEqual([x1, ...xs].map(Number));
  });

  it('two relays with a crashed holder of several ids, rows arriving: the other ids flow, and no id loses its order', async () => {
    // Prepare: rows of ids a…h; the crashed relay holds the first rows of a and b (and of nothing else).
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    const [a1] = await storeRows('a', 1);
    const [b1] = await storeRows('b', 1);
    const held = await crash(2);
    expect(held).toEqual([a1, b1]);
    // A backlog of a and b longer than a window, then a mix of every id (and rows without an id).
    await storeRows('a', 60);
    await storeRows('b', 60);
    let round = 0;
    const storeRound = async () => {
      for (let i = 0; i < keys.length * 3; i += 1) await storeRow(keys[(round + i) % keys.length] ?? null);
      await storeRow(null);
      round += 1;
    };
    for (let r = 0; r < 10; r += 1) await storeRound();
    let producing = true;
    const produce = async () => {
      for (let r = 0; r < 20; r += 1) {
        await storeRound();
        await sleep(10);
      }
      producing = false;
    };
    // Each relay's forward starts up to 8 ms late: which of the two forwards first is a coin toss.
    const jittery = (inbox: InboxStore): InboxStore => ({
      ...inbox,
      async forward(items) {
        await sleep(Math.random() * 8);
        return inbox.forward(items);
      },
      async forwardAndClaim(items, claim) {
        await sleep(Math.random() * 8);
        return inbox.forwardAndClaim(items, claim);
      },
    });
    const relays = stores.map((store) =>
      createRelay({
        store: jittery(store.inbox),
        sources,
        inbox: { relay: { batchSize: 20 } },
        fillMs: 0,
        reclaimIntervalMs: 0,
      }),
    );
    /** Pending rows of ids other than a and b (the held ids). */
    const othersPending = async () =>
      (
        await sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema}".inbox
           WHERE state <> 'processed' AND aggregate_id IS DISTINCT FROM 'a' AND aggregate_id IS DISTINCT FROM 'b'`,
        )
      )[0]?.n;
    let reclaimed = false;
    const until = Date.now() + 25_000;
    const run = async (relay: (typeof relays)[number]) => {
      for (;;) {
        await relay.drain({ deadline: Date.now() + 700 });
        const [left] = await sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema}".inbox WHERE state <> 'processed'`,
        );
        if ((reclaimed && left?.n === 0) || Date.now() > until) return;
      }
    };

    // Act: both relays drain while rows arrive; once every other id's row is forwarded (a and b still held), the
    // crashed relay's leases expire and the relays' reclaim steps return a1 and b1.
    const running = Promise.all(relays.map(run));
    await produce();
    let othersLeft = await othersPending();
    while (othersLeft !== 0 && Date.now() < until) {
      await sleep(50);
      othersLeft = await othersPending();
    }
    const heldWhileOthersDone = await idsIn('processing');
    await sql(
      `UPDATE "${schema}".inbox SET lease_until = now() - interval '1 second' WHERE id = ANY($1::bigint[])`,
      [held],
    );
    reclaimed = true;
    await running;

    // Assess: the other ids were done while a1 and b1 were still held; then everything went, once, in id order.
    expect(producing).toBe(false);
    expect(othersLeft).toBe(0);
    expect(heldWhileOthersDone).toEqual(held);
    const [counts] = await sql<{ inbox: number; outbox: number; distinct_inbox: number; all: number }>(
      `SELECT (SELECT count(*)::int FROM "${schema}".inbox WHERE state = 'processed') AS inbox,
              (SELECT count(*)::int FROM "${schema}".inbox) AS all,
              count(*)::int AS outbox, count(DISTINCT headers->>'x-inbox-id')::int AS distinct_inbox
       FROM "${schema}".outbox`,
    );
    expect(counts?.inbox).toBe(counts?.all);
    expect(counts?.outbox).toBe(counts?.all);
    expect(counts?.distinct_inbox).toBe(counts?.all);
    const order = await forwardedOrder();
    order.delete('');
    expect(order.get('a')?.[0]).toBe(Number(a1));
    expect(order.get('b')?.[0]).toBe(Number(b1));
    expect(inversions(order)).toEqual(Object.fromEntries(keys.map((key) => [key, 0])));
  });
});
