/**
 * The inbox group commit draws ids in the order the stores were called, whatever order it locks the keys in: the
 * relay forwards the rows of one aggregate id in id order, and a broker source hands several deliveries of one queue
 * to the store at once. An outside soak saw a RabbitMQ source's messages `…-2` … `…-10` of one aggregate stored with
 * ids in the key text's order (`…-10` before `…-2`), and delivered so, without any fault.
 */
import type { Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, requireServices } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../src/index.ts';
import { anInboxMessage } from './messages.ts';

const needs = await requireServices('store-postgres: inbox group commit order', ['postgres']);

describe.skipIf(needs.skipReason)('inbox group commit', () => {
  const url = needs.url.postgres;
  const schema = freshSchemaName('inbox_call_order');
  dropSchemasAfterPass(() => [schema], url);
  let store: Store;

  beforeAll(async () => {
    store = await openPostgresStore({ url, schema });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('gives the stores of one statement ids in the order they were called, not in their keys order', async () => {
    // Prepare: keys whose text order is not the call order (`m-10` sorts before `m-2`), and a repeat among them
    const calls = [3, 10, 2, 11, 1, 20, 9].map((n) =>
      anInboxMessage({ source: 'order', idempotencyKey: `m-${n}`, aggregateId: 'a-1', payload: { n } }),
    );
    // Act: called in one turn, so they go in one statement
    const results = await Promise.all(calls.map((message) => store.inbox.store(message)));
    // Assess: every one stored, ids ascending in call order
    expect(results.map((r) => r.status)).toEqual(calls.map(() => 'stored'));
    const ids = results.map((r) => BigInt(r.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    // …and one statement wrote them all (its ids are consecutive)
    const admin = new pg.Client(url);
    await admin.connect();
    try {
      const { rows } = await admin.query<{ xmins: string }>(
        `SELECT count(DISTINCT xmin::text)::text AS xmins FROM "${schema}".inbox WHERE source = 'order'`,
      );
      expect(rows[0]?.xmins).toBe('1');
    } finally {
      await admin.end();
    }
  });

  it('runs a batch that lost a deadlock to a crossing batch again as one statement, its ids still in call order', async () => {
    // Prepare: two stores (two processes) whose batches share keys k1 and k2 in crossing orders, each also with unique
    // messages of one aggregate id. A trigger holds each batch at its `gate-` row, after its first key, until both
    // are there, so the crossing is certain (an outside review: the losing batch went message by message at once,
    // and the messages of one aggregate id got ids out of call order).
    const gateLock = Math.floor(Math.random() * 1_000_000_000);
    const admin = new pg.Client(url);
    await admin.connect();
    const other = await openPostgresStore({ url, schema });
    try {
      await admin.query(`CREATE FUNCTION "${schema}".test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.idempotency_key LIKE 'gate-%' THEN PERFORM pg_advisory_xact_lock_shared(${gateLock}); END IF;
          RETURN NEW;
        END $$`);
      await admin.query(
        `CREATE TRIGGER test_gate BEFORE INSERT ON "${schema}".inbox FOR EACH ROW EXECUTE FUNCTION "${schema}".test_gate()`,
      );
      await admin.query('SELECT pg_advisory_lock($1)', [gateLock]);
      const batch = (side: string, first: string, second: string) => [
        anInboxMessage({ source: 'crossing', idempotencyKey: first }),
        anInboxMessage({ source: 'crossing', idempotencyKey: `gate-${side}` }),
        anInboxMessage({ source: 'crossing', idempotencyKey: second }),
        ...Array.from({ length: 12 }, (_, n) =>
          anInboxMessage({
            source: 'crossing',
            idempotencyKey: `${side}-${n}`,
            aggregateId: `agg-${side}`,
            payload: { n },
          }),
        ),
      ];
      const a = batch('a', 'k1', 'k2');
      const b = batch('b', 'k2', 'k1');
      // Act: both statements start and wait at their gates; then both go on and cross
      const storedA = Promise.all(a.map((message) => store.inbox.store(message)));
      const storedB = Promise.all(b.map((message) => other.inbox.store(message)));
      for (let waited = 0; ; waited += 20) {
        const { rows } = await admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1`,
          [gateLock],
        );
        if ((rows[0]?.n ?? 0) >= 2) break;
        if (waited > 10_000) throw new Error('the two batches never reached their gates');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await admin.query('SELECT pg_advisory_unlock($1)', [gateLock]);
      const [resultsA, resultsB] = await Promise.all([storedA, storedB]);
      // Assess: k1 and k2 stored once each, the other side's copy a duplicate of the same row
      for (const at of [0, 2]) {
        expect([resultsA[at]?.status, resultsB[2 - at]?.status].sort()).toEqual(['duplicate', 'stored']);
        expect(resultsA[at]?.id).toBe(resultsB[2 - at]?.id);
      }
      // …each side's unique messages stored by one statement, with ids in call order
      for (const [side, results] of [
        ['a', resultsA],
        ['b', resultsB],
      ] as const) {
        const ids = results.slice(3).map((r) => BigInt(r.id));
        expect(results.slice(3).map((r) => r.status)).toEqual(ids.map(() => 'stored'));
        expect(ids).toEqual([...ids].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
        const { rows } = await admin.query<{ xmins: string }>(
          `SELECT count(DISTINCT xmin::text)::text AS xmins FROM "${schema}".inbox WHERE source = 'crossing' AND aggregate_id = $1`,
          [`agg-${side}`],
        );
        expect(rows[0]?.xmins).toBe('1');
      }
      // …and every message is there once
      const { rows: all } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".inbox WHERE source = 'crossing'`,
      );
      expect(all[0]?.n).toBe(2 + 2 + 24);
    } finally {
      await admin.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
      await admin.query(`DROP TRIGGER IF EXISTS test_gate ON "${schema}".inbox`).catch(() => undefined);
      await admin.end();
      await other.close();
    }
  });
});
