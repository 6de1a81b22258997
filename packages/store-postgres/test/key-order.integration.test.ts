/**
 * Per-key order across concurrent writers of the store itself (`outbox.insert`, the relay's `inbox.forward`), on
 * a real PostgreSQL, and the statements each write runs, on PostgreSQL and PGlite. Ids come from an identity,
 * drawn at insert time: without the key lock, a transaction that drew the smaller id of a key could commit after
 * one that drew a larger id, and the claim, which delivers the smallest active id of a key first, would deliver
 * the later row first.
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createPgExecutor,
  createPostgresInboxStore,
  createPostgresOutboxStore,
  createPostgresStore,
  lockOutboxKeysStatement,
  outboxKeyLockName,
  type SqlExecutor,
} from '../src/index.ts';
import { withOutboxKeyLocks } from '../src/outbox-store.ts';
import { anInboxMessage, anOutboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_order');
dropSchemasAfterPass(() => [schema]);

const LEASE = { leaseMs: 60_000 };

describe('lockOutboxKeysStatement', () => {
  it('locks each distinct key once, in ascending key order, whatever order it is given', () => {
    const { values } = lockOutboxKeysStatement('qb', ['b', 'a', 'b', 'A', '']);

    expect(values).toEqual([['', 'A', 'a', 'b'].map((key) => outboxKeyLockName('qb', key))]);
    expect(outboxKeyLockName('qb', 'k')).toBe('queuebox.outbox-key:qb:k');
  });

  it('refuses an invalid schema name', () => {
    expect(() => lockOutboxKeysStatement('bad"name', ['k'])).toThrow(/not a valid schema name/);
  });
});

describe('per-key order of concurrent store writes on PostgreSQL', () => {
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

  /**
   * Runs `write` in a transaction of the store's executor and keeps that transaction open until `commit()`: the
   * first writer of a race, which draws its id first and commits last.
   */
  async function openTransaction(write: (tx: SqlExecutor) => Promise<unknown>) {
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let written = () => {};
    const wrote = new Promise<void>((resolve) => {
      written = resolve;
    });
    const done = executor.transaction(async (tx) => {
      await write(tx);
      written();
      await gate;
    });
    await Promise.race([wrote, done]);
    return {
      async commit() {
        release();
        await done;
      },
    };
  }

  /**
   * Resolves `blocked` once `waiters` backends wait for the advisory lock of `key` (pg_locks), `finished` once
   * `done()` says the writer ended before that; polls. No deadline: the test's own timeout bounds it.
   */
  async function waitsForKeyLock(
    key: string,
    done: () => boolean,
    waiters = 1,
  ): Promise<'blocked' | 'finished'> {
    for (;;) {
      if (done()) return 'finished';
      const { rows } = await executor.query<{ waiting: number }>(
        `SELECT count(*)::int AS waiting FROM pg_locks l
WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
  AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)`,
        [outboxKeyLockName(schema, key)],
      );
      if ((rows[0]?.waiting ?? 0) >= waiters) return 'blocked';
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Claims and sends every claimable row as the poller would (one head per key at a time); the payloads of `topic`. */
  async function deliverAll(topic: string): Promise<unknown[]> {
    const delivered: unknown[] = [];
    for (;;) {
      const batch = await store.outbox.claim({ batchSize: 10, ...LEASE });
      if (batch.length === 0) return delivered;
      for (const row of batch) if (row.topic === topic) delivered.push(row.payload);
      await store.outbox.markSent(
        batch.map((row) => ({ id: row.id, claimToken: row.claimToken ?? '', destination: 'test' })),
      );
    }
  }

  /** A write of one keyed outbox row through the store's code, prepared up to the point where it draws its id. */
  type Writer = (
    topic: string,
    key: string,
    payload: string,
  ) => Promise<(on: SqlExecutor) => Promise<unknown>>;

  const insert: Writer = async (topic, key, payload) => (on) =>
    createPostgresOutboxStore({ executor: on, schema }).insert([anOutboxMessage({ topic, key, payload })]);

  /** The relay's forward of a claimed inbox row; the inbox row is stored and claimed beforehand. */
  const forward: Writer = async (topic, key, payload) => {
    const source = `order-${randomUUID()}`;
    await store.inbox.store(anInboxMessage({ source }));
    const [row] = await store.inbox.claim({ sources: [source], batchSize: 1, ...LEASE });
    const item = {
      id: row?.id ?? '',
      claimToken: row?.claimToken ?? '',
      outbox: anOutboxMessage({ topic, key, payload }),
    };
    return async (on) => {
      const report = await createPostgresInboxStore({ executor: on, schema }).forward([item]);
      expect(report.outboxIds).toHaveLength(1);
    };
  };

  it.each([
    ['outbox.insert', 'outbox.insert', insert, insert],
    ['inbox.forward', 'inbox.forward', forward, forward],
    ['outbox.insert', 'inbox.forward', insert, forward],
  ] as const)(
    '%s that drew the smaller id and commits last holds back a concurrent %s of the key',
    async (_a, _b, first, second) => {
      // Prepare: A writes key K in a transaction that stays open, so its row has the smaller id.
      const key = `k-${randomUUID()}`;
      const topic = `order.${key}`;
      const writeA = await first(topic, key, 'A');
      const writeB = await second(topic, key, 'B');
      const a = await openTransaction(writeA);

      // Act: B writes K on the pool and commits as soon as it can; the poller delivers what it can see while A is
      // still open; then A commits, B ends, and the poller delivers the rest.
      let bEnded = false;
      const b = writeB(executor).finally(() => {
        bEnded = true;
      });
      const bWhileAOpen = await waitsForKeyLock(key, () => bEnded);
      const deliveredWhileAOpen = await deliverAll(topic);
      await a.commit();
      await b;
      const delivered = [...deliveredWhileAOpen, ...(await deliverAll(topic))];

      // Assess: B waited for A's lock, so nothing of K was deliverable before A committed, and K came out in
      // commit order. Without the lock B commits first and is delivered first: ['B', 'A'].
      expect(delivered).toEqual(['A', 'B']);
      expect(deliveredWhileAOpen).toEqual([]);
      expect(bWhileAOpen).toBe('blocked');
    },
  );

  it('lets writers of other keys and unkeyed writers go on while a key is locked', async () => {
    const topic = `order.${randomUUID()}`;
    const a = await openTransaction(await insert(topic, 'k1', 'A'));

    // Were either blocked by A, these awaits would not return before A commits, which happens only after them.
    await store.outbox.insert([anOutboxMessage({ topic, key: 'k2', payload: 'B' })]);
    await store.outbox.insert([anOutboxMessage({ topic, key: null, payload: 'unkeyed' })]);
    await a.commit();

    const rows = await executor.query<{ payload: unknown }>(
      `SELECT payload FROM "${schema}".outbox WHERE topic = $1 ORDER BY id`,
      [topic],
    );
    expect(rows.rows.map((r) => r.payload)).toEqual(['A', 'B', 'unkeyed']);
  });

  it("lets a writer of another key of the relay's batch go on while the forward waits for a key an open transaction holds", async () => {
    // Prepare: A holds kz and stays open; the relay's forward writes ka and kz. Taking its locks in key order, it
    // held ka while it waited for kz, so B (ka alone, nothing to do with A) waited for A too (an outside DBA audit).
    const topic = `order.${randomUUID()}`;
    const source = `forward-${randomUUID()}`;
    const a = await openTransaction(await insert(topic, 'kz', 'A'));
    await store.inbox.store(anInboxMessage({ source }));
    await store.inbox.store(anInboxMessage({ source }));
    const claimed = await store.inbox.claim({ sources: [source], batchSize: 2, ...LEASE });
    const items = claimed.map((row, n) => ({
      id: row.id,
      claimToken: row.claimToken ?? '',
      outbox: anOutboxMessage({ topic, key: n === 0 ? 'ka' : 'kz', payload: `F${n}` }),
    }));
    let forwardEnded = false;
    const forwarded = store.inbox.forward(items).finally(() => {
      forwardEnded = true;
    });
    expect(await waitsForKeyLock('kz', () => forwardEnded)).toBe('blocked');

    // Act: B writes ka while A is open and the forward waits.
    const b = store.outbox.insert([anOutboxMessage({ topic, key: 'ka', payload: 'B' })]);
    const bWhileAOpen = await Promise.race([
      b.then(() => 'done'),
      new Promise((resolve) => setTimeout(() => resolve('blocked'), 3_000)),
    ]);
    await a.commit();
    await b;
    const report = await forwarded;

    // Assess: B went on; the forward wrote both rows once A committed; each key's rows are in commit order.
    expect(bWhileAOpen).toBe('done');
    expect(report.settled).toHaveLength(2);
    const rows = await executor.query<{ key: string; payload: unknown }>(
      `SELECT key, payload FROM "${schema}".outbox WHERE topic = $1 ORDER BY id`,
      [topic],
    );
    expect(rows.rows.filter((r) => r.key === 'ka').map((r) => r.payload)).toEqual(['B', 'F0']);
    expect(rows.rows.filter((r) => r.key === 'kz').map((r) => r.payload)).toEqual(['A', 'F1']);
  });

  it('goes through while writers keep taking turns on its keys: after a few waits it takes them in one go', async () => {
    // Prepare: holders take turns on ka and kb, each taking the key the forward does not wait for and committing
    // the one it waits for. A forward that only ever tries every key at once never finds both free (an outside
    // crash soak: 45 s without a forward under six such writers).
    const [ka, kb] = [`ka-${randomUUID()}`, `kb-${randomUUID()}`];
    const names = { [ka]: outboxKeyLockName(schema, ka), [kb]: outboxKeyLockName(schema, kb) };
    const hold = async (key: string) => {
      let got = false;
      const holder = await openTransaction(async (tx) => {
        const { rows } = await tx.query<{ got: boolean }>(
          'SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS got',
          [names[key]],
        );
        got = rows[0]?.got === true;
      });
      if (got) return holder;
      await holder.commit();
      return undefined;
    };
    const waitingFor = async (): Promise<string | undefined> => {
      for (let tries = 0; tries < 400; tries++) {
        const { rows } = await executor.query<{ name: string }>(
          `SELECT n.name FROM pg_locks l JOIN unnest($1::text[]) AS n(name)
             ON ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(n.name, 0)
           WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1`,
          [Object.values(names)],
        );
        const name = rows[0]?.name;
        if (name !== undefined) return name === names[ka] ? ka : kb;
        if (done) return undefined;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return undefined;
    };
    let done = false;
    let current = await hold(ka);
    const forward = withOutboxKeyLocks(executor, schema, [ka, kb], (tx) => tx.query('SELECT 1'), 2).finally(
      () => {
        done = true;
      },
    );
    // Act: up to eight turns, each after the forward is seen waiting.
    let turns = 0;
    while (!done && current !== undefined && turns < 8) {
      const waited = await waitingFor();
      if (waited === undefined) break;
      const next = await hold(waited === ka ? kb : ka);
      await current.commit();
      current = next;
      turns += 1;
    }
    const doneWhileTakingTurns = done || current === undefined;
    await current?.commit();
    await forward;
    // Assess: two waits, then the keys in one go (holding ka while it waits for kb, so the next holder of ka cannot
    // take it): through within the turns. Without the last step it waits as long as the turns go on.
    expect(doneWhileTakingTurns).toBe(true);
    expect(turns).toBeLessThan(8);
  });

  it.each([
    ['waits for the busy key alone', 1],
    ['takes the keys in one go at once (no round left)', 0],
  ] as const)(
    'says how long it waited for a key another transaction held: when it %s',
    async (_what, rounds) => {
      // Prepare: a transaction that inserted a row of the key and commits 400 ms later.
      const topic = `order.${randomUUID()}`;
      const key = `w-${randomUUID()}`;
      const free = await withOutboxKeyLocks(
        executor,
        schema,
        [`f-${randomUUID()}`],
        async () => 'free',
        rounds,
      );
      const holder = await openTransaction(await insert(topic, key, 'app'));
      const committed = new Promise((resolve) => setTimeout(resolve, 400)).then(() => holder.commit());

      // Act
      const started = performance.now();
      const held = await withOutboxKeyLocks(executor, schema, [key], async () => 'held', rounds);
      const tookMs = performance.now() - started;
      await committed;

      // Assess: the wait for the holder counted, the fast try not.
      expect(free).toEqual({ result: 'free', waitedMs: expect.any(Number) });
      expect(held.result).toBe('held');
      expect(held.waitedMs).toBeGreaterThanOrEqual(300);
      expect(held.waitedMs).toBeLessThanOrEqual(tookMs);
      if (rounds === 1) expect(free.waitedMs).toBe(0);
    },
  );

  it('does not deadlock two inserts that name the same keys in opposite orders', async () => {
    // Prepare: C holds x; A (x, y) queues for x; B (y, x) would take y and queue for x. When C commits, A gets x
    // and needs y — held by B, who waits for A: a deadlock, unless both take their keys in one order.
    const topic = `order.${randomUUID()}`;
    const [x, y] = [`x-${randomUUID()}`, `y-${randomUUID()}`];
    const c = await openTransaction(await insert(topic, x, 'C-x'));
    const run = (name: string, keys: string[]) => {
      const state = { ended: false };
      const promise = store.outbox
        .insert(keys.map((key) => anOutboxMessage({ topic, key, payload: `${name}-${key[0]}` })))
        .finally(() => {
          state.ended = true;
        });
      return { state, promise };
    };

    // Act
    const runA = run('A', [x, y]);
    expect(await waitsForKeyLock(x, () => runA.state.ended)).toBe('blocked');
    const runB = run('B', [y, x]);
    expect(await waitsForKeyLock(x, () => runB.state.ended, 2)).toBe('blocked');
    await c.commit();

    // Assess: both commit (a deadlock would reject one of them with SQLSTATE 40P01), A first: it queued first.
    await Promise.all([runA.promise, runB.promise]);
    const rows = await executor.query<{ payload: unknown }>(
      `SELECT payload FROM "${schema}".outbox WHERE topic = $1 ORDER BY id`,
      [topic],
    );
    expect(rows.rows.map((r) => r.payload)).toEqual(['C-x', 'A-x', 'A-y', 'B-y', 'B-x']);
  });
});

/** The store's executor, recording which statements run and whether in a transaction. */
function recording(inner: SqlExecutor, log: string[], depth = 0): SqlExecutor {
  const label = (text: string) =>
    text.includes('pg_advisory_xact_lock') && text.includes('INSERT INTO')
      ? 'lock+insert'
      : text.includes('pg_advisory_xact_lock') || text.includes('pg_try_advisory_xact_lock')
        ? 'lock'
        : text.startsWith('INSERT INTO')
          ? 'insert'
          : text.startsWith('WITH input')
            ? 'forward'
            : 'other';
  return {
    query(text, values) {
      log.push(`${depth > 0 ? 'tx:' : ''}${label(text)}`);
      return inner.query(text, values);
    },
    transaction(fn) {
      log.push('begin');
      return inner.transaction((tx) => fn(recording(tx, log, depth + 1)));
    },
    close: () => inner.close(),
  };
}

const targets = storeTargets(schema, 2);

for (const target of targets) {
  describe(`the statements of a store write on ${target.name}`, () => {
    let inner: SqlExecutor;
    const log: string[] = [];
    let store: Store;

    beforeAll(async () => {
      inner = target.executor();
      await createPostgresStore({ executor: inner, schema: target.schema }).migrate();
      store = createPostgresStore({ executor: recording(inner, log), schema: target.schema });
    });
    afterAll(async () => {
      await inner.close();
    });

    it('inserts unkeyed rows in one autocommit statement, keyed ones in one statement that takes their locks first', async () => {
      log.length = 0;
      const unkeyed = await store.outbox.insert([anOutboxMessage(), anOutboxMessage()]);
      const unkeyedLog = log.splice(0);
      const keyed = await store.outbox.insert([
        anOutboxMessage({ key: 'k2' }),
        anOutboxMessage(),
        anOutboxMessage({ key: 'k1' }),
      ]);

      expect(unkeyedLog).toEqual(['insert']);
      expect(log).toEqual(['lock+insert']);
      expect([unkeyed.length, keyed.length]).toEqual([2, 3]);
      expect((await store.outbox.get(keyed[2] ?? ''))?.key).toBe('k1');
    });

    it('forwards into keyed outbox rows after their locks in one transaction, unkeyed ones in one statement', async () => {
      const source = `forward-${randomUUID()}`;
      await store.inbox.store(anInboxMessage({ source }));
      await store.inbox.store(anInboxMessage({ source }));
      const [first, second] = await store.inbox.claim({ sources: [source], batchSize: 2, ...LEASE });
      const claim = (row: typeof first) => ({ id: row?.id ?? '', claimToken: row?.claimToken ?? '' });

      log.length = 0;
      const unkeyed = await store.inbox.forward([{ ...claim(first), outbox: anOutboxMessage() }]);
      const unkeyedLog = log.splice(0);
      const keyed = await store.inbox.forward([{ ...claim(second), outbox: anOutboxMessage({ key: 'k' }) }]);

      expect(unkeyedLog).toEqual(['forward']);
      expect(log).toEqual(['begin', 'tx:lock', 'tx:forward']);
      expect([unkeyed.outboxIds.length, keyed.outboxIds.length]).toEqual([1, 1]);
      expect((await store.outbox.get(keyed.outboxIds[0] ?? ''))?.key).toBe('k');
    });
  });
}
