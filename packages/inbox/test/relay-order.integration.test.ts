/**
 * The order of one aggregate id through two relays on one PostgreSQL schema (two stores, two pools: two replicas or
 * two relay-tick functions), and the relay's wait for rows another relay holds back (`blockedPauseMs`): the outbox
 * rows of each key must come in the order of the inbox rows they were forwarded from.
 */
import type { InboxStore, Store } from '@queuebox/core';
import { createPgExecutor, createPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRelay, type Sources } from '../src/index.ts';

const schema = freshSchemaName('inbox_relay_order');
dropSchemasAfterPass(() => [schema]);

const sources: Sources = { s: { type: 'http', topic: 'order.{{ source }}' } };
let stores: [Store, Store];
const pool = testPool(2);

beforeAll(async () => {
  stores = [
    createPostgresStore({ executor: createPgExecutor(testPool(4)), schema }),
    createPostgresStore({ executor: createPgExecutor(testPool(4)), schema }),
  ];
  await stores[0].migrate();
});
afterAll(async () => {
  await Promise.all([...stores.map((s) => s.close()), pool.end()]);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Plain SQL on the test server. */
async function sql<R>(text: string, values: unknown[] = []): Promise<R[]> {
  return (await pool.query(text, values)).rows as R[];
}

/** Per outbox key, the inbox ids its rows were forwarded from, in outbox id order. */
async function forwardedOrder(): Promise<Map<string, number[]>> {
  const rows = await sql<{ key: string; inbox_ids: string[] }>(
    `SELECT key, array_agg(headers->>'x-inbox-id' ORDER BY id) AS inbox_ids
     FROM "${schema}".outbox GROUP BY key ORDER BY key`,
  );
  return new Map(rows.map((r) => [r.key, r.inbox_ids.map(Number)]));
}

async function clearTables() {
  await sql(`DELETE FROM "${schema}".inbox`);
  await sql(`DELETE FROM "${schema}".outbox`);
}

describe('two relays on one schema', () => {
  beforeEach(clearTables);

  it('forward the rows of every aggregate id in id order while rows arrive: none lost, none twice', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
    let n = 0;
    const storeRound = async () => {
      for (let i = 0; i < 30; i += 1, n += 1) {
        await stores[0].inbox.store({
          source: 's',
          idempotencyKey: `m-${n}`,
          aggregateId: ids[n % ids.length] ?? null,
          payload: { n },
          maxAttempts: 3,
        });
      }
    };
    // Half the rows wait when the relays start; the rest arrive while they run.
    for (let round = 0; round < 20; round += 1) await storeRound();
    let producing = true;
    const produce = async () => {
      for (let round = 0; round < 20; round += 1) {
        await storeRound();
        await sleep(5);
      }
      producing = false;
    };
    // Each relay's forward starts up to 8 ms late, as a busy process or network makes it: which of two relays
    // forwards first is then a coin toss.
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
      createRelay({ store: jittery(store.inbox), sources, inbox: { relay: { batchSize: 5 } }, fillMs: 0 }),
    );
    const until = Date.now() + 25_000;
    const run = async (relay: (typeof relays)[number]) => {
      for (;;) {
        await relay.drain({ deadline: Date.now() + 1000 });
        const [left] = await sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema}".inbox WHERE state <> 'processed'`,
        );
        if ((!producing && left?.n === 0) || Date.now() > until) return;
      }
    };

    await Promise.all([produce(), ...relays.map(run)]);

    const [counts] = await sql<{ inbox: number; outbox: number; distinct_inbox: number }>(
      `SELECT (SELECT count(*)::int FROM "${schema}".inbox WHERE state = 'processed') AS inbox,
              count(*)::int AS outbox, count(DISTINCT headers->>'x-inbox-id')::int AS distinct_inbox
       FROM "${schema}".outbox`,
    );
    expect(counts).toEqual({ inbox: 1200, outbox: 1200, distinct_inbox: 1200 });
    const order = await forwardedOrder();
    // Per key: how many of its outbox rows come after a row forwarded from a later inbox row.
    const inversions = Object.fromEntries(
      [...order].map(([key, inboxIds]) => [
        key,
        inboxIds.filter((id, i) => inboxIds.slice(0, i).some((before) => before > id)).length,
      ]),
    );
    expect([...order.values()].map((inboxIds) => inboxIds.length)).toEqual(ids.map(() => 200));
    expect(inversions).toEqual(Object.fromEntries(ids.map((key) => [key, 0])));
  });

  it('a relay whose rows wait for another relay claims them once that one forwarded, within its drain, unwoken', async () => {
    const store = (key: string) =>
      stores[0].inbox.store({
        source: 's',
        idempotencyKey: key,
        aggregateId: 'x',
        payload: {},
        maxAttempts: 3,
      });
    const x1 = (await store('x1')).id;
    // Relay A has claimed x1 and not forwarded it yet; then x2 arrives.
    const [held] = await stores[0].inbox.claimForRelay({ sources: ['s'], batchSize: 10, leaseMs: 60_000 });
    const x2 = (await store('x2')).id;
    const relayB = createRelay({ store: stores[1].inbox, sources, fillMs: 0, chainMs: 0 });

    // Relay B drains while A still holds x1; A forwards x1 (its own last step: it claims nothing after) 300 ms in.
    const drained = relayB.drain({ deadline: Date.now() + 10_000 });
    await sleep(300);
    const forwardedByA = await stores[0].inbox.forward([
      {
        id: x1,
        claimToken: held?.claimToken ?? '',
        outbox: { topic: 'order.s', key: 'x', headers: { 'x-inbox-id': x1 }, maxAttempts: 3 },
      },
    ]);
    const report = await drained;

    expect(held?.id).toBe(x1);
    expect(forwardedByA.settled).toHaveLength(1);
    expect(report).toMatchObject({ forwarded: 1, stoppedFor: 'empty' });
    expect((await forwardedOrder()).get('x')).toEqual([Number(x1), Number(x2)]);
  });
});
