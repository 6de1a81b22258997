import { randomUUID } from 'node:crypto';
import type { OutboxRow, OutboxStore, Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createPgExecutor,
  createPostgresStore,
  type SqlExecutor,
  selectInstallIdStatement,
} from '../src/index.ts';
import {
  claimOutboxStatement,
  claimUnkeyedOutboxStatement,
  createOutboxClaim,
  HEAD_CLAIM_EVERY,
} from '../src/outbox-claim.ts';
import { anOutboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_claim');
dropSchemasAfterPass(() => [schema]);

const LEASE = { leaseMs: 60_000 };

const targets = storeTargets(schema, 6);

function keyed(key: string, count: number, overrides = {}) {
  return Array.from({ length: count }, (_, i) => anOutboxMessage({ key, payload: { key, i }, ...overrides }));
}

function keysOf(rows: readonly OutboxRow[]): (string | null)[] {
  return rows.map((r) => r.key);
}

async function sendAll(outbox: OutboxStore, rows: readonly OutboxRow[]) {
  await outbox.markSent(rows.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', destination: 'd' })));
}

for (const target of targets) {
  describe(`claim on ${target.name}`, () => {
    let executor: SqlExecutor;
    let store: Store;
    /** A store with its own rotation state and a small walk bound, over the same tables. */
    const withScanLimit = (keyScanLimit: number) =>
      createPostgresStore({ executor, schema: target.schema, keyScanLimit }).outbox;

    beforeAll(async () => {
      executor = target.executor();
      store = createPostgresStore({ executor, schema: target.schema });
      await store.migrate();
    });
    afterAll(async () => {
      await store.close();
    });
    beforeEach(async () => {
      await executor.query(`DELETE FROM "${target.schema}".outbox`);
    });

    it('claims only the head of each key, however many rows wait behind it, plus unkeyed rows', async () => {
      const hot = await store.outbox.insert(keyed('hot', 400));
      const small = await store.outbox.insert(
        Array.from({ length: 12 }, (_, i) => keyed(`k${String(i).padStart(2, '0')}`, 3)).flat(),
      );
      const unkeyed = await store.outbox.insert(Array.from({ length: 5 }, () => anOutboxMessage()));

      const claimed = await store.outbox.claim({ batchSize: 100, ...LEASE });

      const heads = [hot[0], ...Array.from({ length: 12 }, (_, i) => small[i * 3])];
      expect(claimed.map((r) => r.id).sort()).toEqual([...heads, ...unkeyed].sort());
      expect(new Set(claimed.map((r) => r.claimToken)).size).toBe(1);
      expect(claimed.every((r) => r.state === 'Processing' && r.leaseUntil !== null)).toBe(true);
    });

    it('claims a new due row at once beside more keys than one walk visits whose heads are not due', async () => {
      // Prepare: 60 keys whose head is scheduled an hour ahead and a walk bound of 10 (an outside audit: 100,000 keys
      // at 1,000, p50 5 s before the walk reached a new row of another key); a new row of a key that sorts after
      // them, one due behind a head that is not, and one behind a head in processing
      const walk10 = withScanLimit(10);
      const pad = (n: number) => String(n).padStart(3, '0');
      await store.outbox.insert(
        Array.from({ length: 60 }, (_, n) => anOutboxMessage({ key: `later-${pad(n)}`, delayMs: 3_600_000 })),
      );
      const [busyHead] = await store.outbox.insert([anOutboxMessage({ key: 'zz-busy' })]);
      const [taken] = await walk10.claim({ batchSize: 1, ...LEASE });
      const [fresh, behindLater, behindBusy] = await store.outbox.insert([
        anOutboxMessage({ key: 'zz-fresh' }),
        anOutboxMessage({ key: 'later-007' }),
        anOutboxMessage({ key: 'zz-busy' }),
      ]);
      // Act
      const claimed = await walk10.claim({ batchSize: 10, ...LEASE });
      // Assess: the new row of its own key, and neither row behind a head (per-key order)
      expect(taken?.id).toBe(busyHead);
      expect(claimed.map((r) => r.id)).toEqual([fresh]);
      expect(claimed.map((r) => r.id)).not.toContain(behindLater);
      expect(claimed.map((r) => r.id)).not.toContain(behindBusy);
    });

    it('holds a key back while its head is processing or waiting for a retry, then releases the next row', async () => {
      const ids = await store.outbox.insert([...keyed('a', 3), ...keyed('b', 3)]);
      const [a1, a2, , b1, b2] = ids;

      const first = await store.outbox.claim({ batchSize: 10, ...LEASE });
      const whileProcessing = await store.outbox.claim({ batchSize: 10, ...LEASE });
      const aHead = first.find((r) => r.id === a1) as OutboxRow;
      const bHead = first.find((r) => r.id === b1) as OutboxRow;
      await store.outbox.retry([
        { id: aHead.id, claimToken: aHead.claimToken ?? '', error: 'x', delayMs: 60_000 },
      ]);
      await sendAll(store.outbox, [bHead]);
      const afterSettles = await store.outbox.claim({ batchSize: 10, ...LEASE });

      expect(first.map((r) => r.id).sort()).toEqual([a1, b1].sort());
      expect(whileProcessing).toEqual([]);
      // a1 waits for its retry and holds a2 back; b1 was sent, so b2 is the new head.
      expect(afterSettles.map((r) => r.id)).toEqual([b2]);
      expect(afterSettles.map((r) => r.id)).not.toContain(a2);
    });

    it('starts each walk after the last key it claimed, so successive claims spread over the keys', async () => {
      const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
      await store.outbox.insert(keys.flatMap((k) => keyed(k, 2)));
      const outbox = withScanLimit(100);

      const first = await outbox.claim({ batchSize: 3, ...LEASE });
      await sendAll(outbox, first);
      const second = await outbox.claim({ batchSize: 3, ...LEASE });
      await sendAll(outbox, second);
      const third = await outbox.claim({ batchSize: 3, ...LEASE });

      expect(keysOf(first)).toEqual(['a', 'b', 'c']);
      expect(keysOf(second)).toEqual(['d', 'e', 'f']);
      // The walk wraps around: after g it comes back to a, whose second row is now the head.
      expect(keysOf(third).sort()).toEqual(['a', 'b', 'g']);
    });

    it('gets past a stretch of blocked keys longer than its walk bound', async () => {
      // Ten keys whose heads wait for a retry, then three keys with due heads; the due ones written first, so they
      // are not among the newest rows, which the claim also reads when its walk comes back short.
      const due = await store.outbox.insert(['b0', 'b1', 'b2'].map((key) => anOutboxMessage({ key })));
      for (const key of ['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8', 'a9']) {
        await store.outbox.insert([anOutboxMessage({ key, delayMs: 60_000 }), anOutboxMessage({ key })]);
      }
      const outbox = withScanLimit(4);

      const claims: OutboxRow[][] = [];
      for (let i = 0; i < 4; i++) claims.push(await outbox.claim({ batchSize: 10, ...LEASE }));

      const claimed = claims.flat();
      expect(claimed.map((r) => r.id).sort()).toEqual([...due].sort());
      // Four keys per walk: a0–a3, a4–a7, a8–b1 (claims b0 and b1), then b2 onwards.
      expect(claims.map(keysOf)).toEqual([[], [], ['b0', 'b1'], ['b2']]);
    });

    it('shares a batch between keyed heads and unkeyed rows, and alternates them at batch size 1', async () => {
      await store.outbox.insert(Array.from({ length: 20 }, (_, i) => anOutboxMessage({ key: `k${i}` })));
      await store.outbox.insert(Array.from({ length: 20 }, () => anOutboxMessage()));

      const batch = await store.outbox.claim({ batchSize: 10, ...LEASE });
      const singles = [
        await store.outbox.claim({ batchSize: 1, ...LEASE }),
        await store.outbox.claim({ batchSize: 1, ...LEASE }),
      ].flat();

      expect(batch.filter((r) => r.key === null)).toHaveLength(5);
      expect(batch.filter((r) => r.key !== null)).toHaveLength(5);
      expect(singles.map((r) => r.key === null).sort()).toEqual([false, true]);
    });

    it('fills the batch with one kind when the other has nothing due', async () => {
      await store.outbox.insert(Array.from({ length: 8 }, (_, i) => anOutboxMessage({ key: `k${i}` })));
      await store.outbox.insert(Array.from({ length: 3 }, () => anOutboxMessage({ delayMs: 60_000 })));

      const claimed = await store.outbox.claim({ batchSize: 6, ...LEASE });

      expect(claimed).toHaveLength(6);
      expect(claimed.every((r) => r.key !== null)).toBe(true);
    });

    it('claims with the light statement while no key is active, and with the whole one while a key is', async () => {
      const statements: string[] = [];
      const recording: SqlExecutor = {
        query(text, values) {
          // The store reads its install id once, before its first claim: not a claim statement.
          if (text === selectInstallIdStatement(target.schema).text) return executor.query(text, values);
          statements.push(text.includes('WITH RECURSIVE walk') ? 'whole' : 'light');
          return executor.query(text, values);
        },
        transaction: (fn) => executor.transaction(fn),
        close: async () => undefined,
      };
      const outbox = createPostgresStore({ executor: recording, schema: target.schema }).outbox;
      const claimOf = async (batchSize: number) => {
        statements.length = 0;
        const rows = await outbox.claim({ batchSize, ...LEASE });
        return { rows, statements: [...statements] };
      };
      const first = await store.outbox.insert(Array.from({ length: 3 }, () => anOutboxMessage()));

      const unkeyedOnly = await claimOf(10);
      const head = await store.outbox.insert(keyed('a', 2));
      const more = await store.outbox.insert(Array.from({ length: 9 }, () => anOutboxMessage()));
      const keyArrived = await claimOf(2);
      await sendAll(outbox, keyArrived.rows);
      const keyStillActive = await claimOf(20);
      await sendAll(outbox, keyStillActive.rows);
      const walkFoundNone = await claimOf(10);
      const later = await store.outbox.insert([anOutboxMessage()]);
      const noKeyAgain = await claimOf(10);

      expect(unkeyedOnly.rows.map((r) => r.id).sort()).toEqual([...first].sort());
      expect(unkeyedOnly.statements).toEqual(['light']);
      // The light statement saw a pending keyed row, claimed nothing and handed over to the whole claim, which
      // shares the batch between the key's head and the oldest unkeyed row.
      expect(keyArrived.rows.map((r) => r.id)).toEqual([head[0], more[0]]);
      expect(keyArrived.statements).toEqual(['light', 'whole']);
      expect(keyStillActive.rows.map((r) => r.id).sort()).toEqual([head[1], ...more.slice(1)].sort());
      expect(keyStillActive.statements).toEqual(['whole']);
      // The walk found no key: the next claim is the light one again.
      expect(walkFoundNone.rows).toEqual([]);
      expect(walkFoundNone.statements).toEqual(['whole']);
      expect(noKeyAgain.rows.map((r) => r.id)).toEqual(later);
      expect(noKeyAgain.statements).toEqual(['light']);
    });

    it('starts a light claim at the given fraction of the due rows and wraps around to the oldest', async () => {
      // One insert: one scheduled_at for all ten, so the start falls by id (lo + ⌊f × 10⌋).
      const ids = await store.outbox.insert(Array.from({ length: 10 }, () => anOutboxMessage()));
      const claimAt = async (start: number) => {
        const statement = claimUnkeyedOutboxStatement(target.schema, {
          batchSize: 3,
          leaseMs: 60_000,
          claimToken: randomUUID(),
          start,
        });
        const { rows } = await executor.query<{ id: unknown }>(statement.text, statement.values);
        return rows.filter((r) => r.id !== null).map((r) => String(r.id));
      };

      const middle = await claimAt(0.5);
      const wrapped = await claimAt(0.95);
      const oldest = await claimAt(0);

      expect(middle).toEqual(ids.slice(5, 8));
      // From the newest due row on, then the oldest fill the batch.
      expect(wrapped).toEqual([ids[0], ids[1], ids[9]]);
      expect(oldest).toEqual([ids[2], ids[3], ids[4]]);
      expect(() =>
        claimUnkeyedOutboxStatement(target.schema, {
          batchSize: 1,
          leaseMs: 1,
          claimToken: randomUUID(),
          start: 1,
        }),
      ).toThrow(RangeError);
    });

    it(`starts every ${HEAD_CLAIM_EVERY}th light claim of a store at the oldest due row, the others at a random point`, async () => {
      const ids = await store.outbox.insert(Array.from({ length: 10 }, () => anOutboxMessage()));
      const claim = createOutboxClaim({ executor, schema: target.schema, randomStart: () => 0.5 });

      const claims: string[][] = [];
      for (let i = 0; i < 5; i++) claims.push((await claim({ batchSize: 2, ...LEASE })).map((r) => r.id));

      const at = (...indexes: number[]) => indexes.map((i) => ids[i]);
      expect(HEAD_CLAIM_EVERY).toBe(4);
      expect(claims).toEqual([
        at(0, 1), // the oldest
        at(6, 7), // due 2…9: halfway is 2 + ⌊0.5 × 8⌋ = 6
        at(8, 9), // due 2…5, 8, 9: from 6 on
        at(4, 5), // due 2…5: 2 + ⌊0.5 × 4⌋ = 4
        at(2, 3), // the oldest again
      ]);
    });

    it('starts the light claim after a short one at the oldest due row: there was no backlog to spread over', async () => {
      const claim = createOutboxClaim({ executor, schema: target.schema, randomStart: () => 0.5 });
      const first = await store.outbox.insert(Array.from({ length: 3 }, () => anOutboxMessage()));
      const short = (await claim({ batchSize: 5, ...LEASE })).map((r) => r.id);
      const ids = await store.outbox.insert(Array.from({ length: 10 }, () => anOutboxMessage()));

      const next = (await claim({ batchSize: 2, ...LEASE })).map((r) => r.id);
      const then = (await claim({ batchSize: 2, ...LEASE })).map((r) => r.id);

      expect(short).toEqual(first);
      // Not from halfway (ids 5, 6), as the second light claim of a store would start after a full one.
      expect(next).toEqual([ids[0], ids[1]]);
      // A full claim: the next starts at a random point again (due 2…9: 2 + ⌊0.5 × 8⌋ = 6).
      expect(then).toEqual([ids[6], ids[7]]);
    });
  });
}

describe('claim on PostgreSQL, measured by the plan', () => {
  let executor: SqlExecutor;
  let store: Store;
  beforeAll(async () => {
    executor = createPgExecutor(testPool(6));
    store = createPostgresStore({ executor, schema });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
  });
  beforeEach(async () => {
    await executor.query(`DELETE FROM "${schema}".outbox`);
  });

  /** Rows every plan node produced or filtered away, summed over its loops. */
  function rowsTouched(node: Record<string, unknown>): number {
    const own =
      ((node['Actual Rows'] as number) ?? 0) * ((node['Actual Loops'] as number) ?? 1) +
      ((node['Rows Removed by Filter'] as number) ?? 0) +
      ((node['Rows Removed by Index Recheck'] as number) ?? 0);
    const children = (node.Plans as Record<string, unknown>[] | undefined) ?? [];
    return own + children.reduce((sum, child) => sum + rowsTouched(child), 0);
  }

  it('reads a handful of rows with one hot key of 3,000 pending rows at the head', async () => {
    await executor.query(
      `INSERT INTO "${schema}".outbox (topic, key, payload, max_attempts)
       SELECT 't', 'hot', '{}', 3 FROM generate_series(1, 3000)`,
    );
    await executor.query(`ANALYZE "${schema}".outbox`);
    const { text, values } = claimOutboxStatement(schema, {
      batchSize: 100,
      unkeyedReserve: 50,
      leaseMs: 60_000,
      startAfterKey: null,
      keyScanLimit: 1000,
      claimToken: randomUUID(),
    });

    let plan: Record<string, unknown> | undefined;
    const rollBack = new Error('roll the measured claim back');
    await executor
      .transaction(async (tx) => {
        const { rows } = await tx.query<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
          values,
        );
        plan = rows[0]?.['QUERY PLAN'][0].Plan;
        throw rollBack;
      })
      .catch((error: unknown) => {
        if (error !== rollBack) throw error;
      });

    expect(plan).toBeDefined();
    // The naive NOT EXISTS claim reads the 3,000 rows of the hot key; the walk reads its head.
    expect(rowsTouched(plan as Record<string, unknown>)).toBeLessThan(60);
  });

  it('flags heads lost to another claimer as contention, and skips them without waiting', async () => {
    const [a1, , b1] = await store.outbox.insert([
      anOutboxMessage({ key: 'a' }),
      anOutboxMessage({ key: 'a' }),
      anOutboxMessage({ key: 'b' }),
    ]);
    const statement = () =>
      claimOutboxStatement(schema, {
        batchSize: 10,
        unkeyedReserve: 5,
        leaseMs: 60_000,
        startAfterKey: null,
        keyScanLimit: 1000,
        claimToken: randomUUID(),
      });
    const holderPool = testPool(1);
    const holder = await holderPool.connect();
    try {
      // Another claimer's transaction holds a's head and has not committed yet.
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${schema}".outbox WHERE id = $1 FOR UPDATE`, [a1]);

      const whileHeld = await executor.query<{ id: string | null; contended: boolean }>(
        statement().text,
        statement().values,
      );
      await holder.query('ROLLBACK');
      const afterwards = await executor.query<{ id: string | null; contended: boolean }>(
        statement().text,
        statement().values,
      );

      expect(whileHeld.rows.map((r) => r.id)).toEqual([b1]);
      expect(whileHeld.rows[0]?.contended).toBe(true);
      expect(afterwards.rows.map((r) => r.id)).toEqual([a1]);
      expect(afterwards.rows[0]?.contended).toBe(false);
    } finally {
      holder.release();
      await holderPool.end();
    }
  });

  it('keeps insert order per key with four concurrent claimers that also retry', async () => {
    const keys = Array.from({ length: 30 }, (_, i) => `key-${i}`);
    await store.outbox.insert(
      Array.from({ length: 15 }, () => keys.map((key) => anOutboxMessage({ key, maxAttempts: 100 }))).flat(),
    );
    await store.outbox.insert(Array.from({ length: 50 }, () => anOutboxMessage({ maxAttempts: 100 })));
    let seed = 7;
    const random = () => {
      seed = (seed * 48271) % 2147483647;
      return seed / 2147483647;
    };

    const worker = async () => {
      for (;;) {
        const rows = await store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
        if (rows.length === 0) {
          const { rows: left } = await executor.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${schema}".outbox WHERE state <> 'sent'`,
          );
          if (left[0]?.n === 0) return;
          continue;
        }
        const retried = rows.filter(() => random() < 0.2);
        const sent = rows.filter((r) => !retried.includes(r));
        await store.outbox.retry(
          retried.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', error: 'x', delayMs: 0 })),
        );
        await sendAll(store.outbox, sent);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);

    // sent_at is the start of the settling transaction, which comes after the claim, which comes after the
    // commit that sent the previous row of the key: per key, sending order is sent_at order.
    const { rows } = await executor.query<{ key: string; ids: string[] }>(
      `SELECT key, array_agg(id::text ORDER BY sent_at, id) AS ids FROM "${schema}".outbox
       WHERE key IS NOT NULL GROUP BY key`,
    );
    expect(rows).toHaveLength(30);
    for (const row of rows) {
      expect(row.ids.map(Number)).toEqual([...row.ids.map(Number)].sort((a, b) => a - b));
    }
    const { rows: states } = await executor.query(
      `SELECT state, count(*)::int AS n FROM "${schema}".outbox GROUP BY state`,
    );
    expect(states).toEqual([{ state: 'sent', n: 500 }]);
  });
});
