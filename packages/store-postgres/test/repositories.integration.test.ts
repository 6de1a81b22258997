import { MessageState, type RowId, type Store, type Table } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgExecutor, createPostgresStore, type SqlExecutor } from '../src/index.ts';
import { anInboxMessage, anOutboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_repo');
dropSchemasAfterPass(() => [schema]);

const LEASE = { leaseMs: 60_000 };

const targets = storeTargets(schema, 6);

for (const target of targets) {
  describe(`repositories on ${target.name}`, () => {
    let executor: SqlExecutor;
    let store: Store;
    const table = (t: Table) => `"${target.schema}".${t}`;
    const expire = (t: Table, ids: readonly RowId[]) =>
      executor.query(
        `UPDATE ${table(t)} SET lease_until = now() - interval '1 second' WHERE id = ANY($1::bigint[])`,
        [ids],
      );
    /** Claims exactly the given outbox rows (the only due ones), so each test starts from a clean slate. */
    const claimOutbox = async (count: number, maxAttempts = 3) => {
      await executor.query(`DELETE FROM ${table('outbox')}`);
      await store.outbox.insert(Array.from({ length: count }, () => anOutboxMessage({ maxAttempts })));
      return store.outbox.claim({ batchSize: count, ...LEASE });
    };

    beforeAll(async () => {
      executor = target.executor();
      store = createPostgresStore({ executor, schema: target.schema });
      await store.migrate();
    });
    afterAll(async () => {
      await store.close();
    });

    it('retries to pending later while attempts remain and to dead on the last one, keeping the error', async () => {
      const [row] = await claimOutbox(1, 2);
      const claim = { id: row?.id ?? '', claimToken: row?.claimToken ?? '' };

      const first = await store.outbox.retry([{ ...claim, error: 'e1', delayMs: 0, destination: 'd1' }]);
      const [again] = await store.outbox.claim({ batchSize: 1, ...LEASE });
      const second = await store.outbox.retry([
        { id: claim.id, claimToken: again?.claimToken ?? '', error: 'e2', delayMs: 0 },
      ]);
      const after = await store.outbox.get(claim.id);

      expect(first.settled).toEqual([{ id: claim.id, state: MessageState.Pending }]);
      expect(second.settled).toEqual([{ id: claim.id, state: MessageState.Dead }]);
      expect(after).toMatchObject({
        state: 'Dead',
        attempt: 2,
        lastError: 'e2',
        destination: 'd1',
        claimToken: null,
      });
    });

    it('keeps an error or reason holding U+0000 or a lone surrogate, mended to U+FFFD, without failing the batch', async () => {
      // A destination's error body, an exception's message: PostgreSQL refuses U+0000 in text, and one such text
      // used to fail the statement that settles every row of the batch.
      const rows = await claimOutbox(3);
      const [a, b, c] = rows.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '' }));
      const retried = await store.outbox.retry([
        { ...(a ?? { id: '', claimToken: '' }), error: 'HTTP 500: \u0000abc', delayMs: 0 },
        { ...(b ?? { id: '', claimToken: '' }), error: 'plain', delayMs: 0 },
      ]);
      const dead = await store.outbox.markDead([
        { ...(c ?? { id: '', claimToken: '' }), reason: 'HTTP 400: x\uD83D', attempted: true },
      ]);
      const { id: inboxId } = await store.inbox.store(anInboxMessage({ source: `nul-${target.name}` }));
      const [claimed] = await store.inbox.claim({ sources: [`nul-${target.name}`], batchSize: 1, ...LEASE });
      const inboxRetry = await store.inbox.retry([
        { id: inboxId, claimToken: claimed?.claimToken ?? '', error: 'Unexpected token \u0000', delayMs: 0 },
      ]);
      const storedDead = await store.inbox.storeDead(anInboxMessage(), 'not JSON: \u0000\uDE00');

      expect(retried.settled.map((r) => r.state)).toEqual([MessageState.Pending, MessageState.Pending]);
      expect(dead.settled).toEqual([{ id: c?.id, state: MessageState.Dead }]);
      expect(inboxRetry.settled).toEqual([{ id: inboxId, state: MessageState.Pending }]);
      expect((await store.outbox.get(a?.id ?? ''))?.lastError).toBe('HTTP 500: \uFFFDabc');
      expect((await store.outbox.get(b?.id ?? ''))?.lastError).toBe('plain');
      expect((await store.outbox.get(c?.id ?? ''))?.lastError).toBe('HTTP 400: x\uFFFD');
      expect((await store.inbox.get(inboxId))?.lastError).toBe('Unexpected token \uFFFD');
      expect((await store.inbox.get(storedDead.id))?.lastError).toBe('not JSON: \uFFFD\uFFFD');
    });

    it('schedules a retry on the database clock', async () => {
      const [row] = await claimOutbox(1);

      await store.outbox.retry([
        { id: row?.id ?? '', claimToken: row?.claimToken ?? '', error: 'x', delayMs: 3_600_000 },
      ]);
      const after = await store.outbox.get(row?.id ?? '');
      const { rows } = await executor.query<{ now: Date }>('SELECT now() AS now');

      const delay = (after?.scheduledAt.getTime() ?? 0) - (rows[0]?.now.getTime() ?? 0);
      expect(delay).toBeGreaterThan(3_590_000);
      expect(delay).toBeLessThanOrEqual(3_600_000);
      expect(await store.outbox.claim({ batchSize: 1, ...LEASE })).toEqual([]);
    });

    it('counts an attempt on markDead only when one was made, and never on release', async () => {
      const [a, b, c] = await claimOutbox(3);

      await store.outbox.markDead([
        { id: a?.id ?? '', claimToken: a?.claimToken ?? '', reason: 'no route' },
        { id: b?.id ?? '', claimToken: b?.claimToken ?? '', reason: '400', attempted: true },
      ]);
      const released = await store.outbox.release([{ id: c?.id ?? '', claimToken: c?.claimToken ?? '' }]);

      expect(await store.outbox.get(a?.id ?? '')).toMatchObject({
        state: 'Dead',
        attempt: 0,
        lastError: 'no route',
      });
      expect(await store.outbox.get(b?.id ?? '')).toMatchObject({
        state: 'Dead',
        attempt: 1,
        lastError: '400',
      });
      expect(released.settled).toEqual([{ id: c?.id, state: 'Pending' }]);
      expect(await store.outbox.claim({ batchSize: 5, ...LEASE })).toMatchObject([{ id: c?.id, attempt: 0 }]);
    });

    it('reports a wrong token, an unknown id and a malformed id as stale and changes nothing', async () => {
      const [row] = await claimOutbox(1);
      const id = row?.id ?? '';

      const report = await store.outbox.markSent([
        { id, claimToken: '00000000-0000-4000-8000-000000000000', destination: 'd' },
        { id: '987654321', claimToken: row?.claimToken ?? '', destination: 'd' },
        { id: 'not-an-id', claimToken: row?.claimToken ?? '', destination: 'd' },
        { id, claimToken: 'not-a-uuid', destination: 'd' },
      ]);

      expect(report).toEqual({ settled: [], stale: [id, '987654321', 'not-an-id'] });
      expect((await store.outbox.get(id))?.state).toBe('Processing');
    });

    it('reclaims expired leases counting the attempt, dead when none remains, at most `limit` rows', async () => {
      await executor.query(`DELETE FROM ${table('outbox')}`);
      await store.outbox.insert([
        anOutboxMessage({ maxAttempts: 1 }),
        ...Array.from({ length: 3 }, () => anOutboxMessage()),
      ]);
      const claimed = await store.outbox.claim({ batchSize: 4, ...LEASE });
      await expire(
        'outbox',
        claimed.map((r) => r.id),
      );

      const first = await store.outbox.reclaimExpired(3);
      const second = await store.outbox.reclaimExpired();
      const rows = await Promise.all(claimed.map((r) => store.outbox.get(r.id)));

      expect(first.returned + first.dead).toBe(3);
      expect(first.returned + second.returned).toBe(3);
      expect(first.dead + second.dead).toBe(1);
      expect(rows.map((r) => [r?.state, r?.attempt, r?.lastError])).toEqual([
        ['Dead', 1, 'lease expired'],
        ['Pending', 1, 'lease expired'],
        ['Pending', 1, 'lease expired'],
        ['Pending', 1, 'lease expired'],
      ]);
    });

    it('maps an unknown state literal to Failed, and never claims such a row', async () => {
      await executor.query(`DELETE FROM ${table('outbox')}`);
      const [id] = await store.outbox.insert([anOutboxMessage()]);
      await executor.query(`UPDATE ${table('outbox')} SET state = 'paused' WHERE id = $1`, [id]);

      expect((await store.outbox.get(id ?? ''))?.state).toBe(MessageState.Failed);
      expect(await store.outbox.claim({ batchSize: 5, ...LEASE })).toEqual([]);
    });

    it('answers duplicate with the first id for a repeated key, also for a dead store', async () => {
      const message = anInboxMessage();

      const stored = await store.inbox.store(message);
      const repeat = await store.inbox.store({ ...message, payload: { other: true } });
      const repeatDead = await store.inbox.storeDead(message, 'rejected');
      const dead = await store.inbox.storeDead(anInboxMessage(), 'not JSON');

      expect(stored.status).toBe('stored');
      expect(repeat).toEqual({ status: 'duplicate', id: stored.id });
      expect(repeatDead).toEqual({ status: 'duplicate', id: stored.id });
      expect(await store.inbox.get(dead.id)).toMatchObject({
        state: 'Dead',
        lastError: 'not JSON',
        attempt: 0,
      });
      expect((await store.inbox.get(stored.id))?.payload).toEqual(message.payload);
    });

    it('takes over expired claims only when asked, with a new token and one more attempt', async () => {
      const source = `takeover-${target.name}`;
      const { id } = await store.inbox.store(anInboxMessage({ source }));
      const [first] = await store.inbox.claim({ sources: [source], batchSize: 5, ...LEASE });
      await expire('inbox', [id]);

      const relayClaim = await store.inbox.claim({ sources: [source], batchSize: 5, ...LEASE });
      const pullClaim = await store.inbox.claim({
        sources: [source],
        batchSize: 5,
        ...LEASE,
        takeOverExpired: true,
      });
      const late = await store.inbox.markProcessed([{ id, claimToken: first?.claimToken ?? '' }]);

      expect(relayClaim).toEqual([]);
      expect(pullClaim).toMatchObject([{ id, state: 'Processing', attempt: 1 }]);
      expect(pullClaim[0]?.claimToken).not.toBe(first?.claimToken);
      expect(late).toEqual({ settled: [], stale: [id] });
    });

    it('reclaims expired relay claims of the given sources to pending, never dead', async () => {
      const source = `reclaim-${target.name}`;
      const { id } = await store.inbox.store(anInboxMessage({ source, maxAttempts: 1 }));
      const { id: otherId } = await store.inbox.store(anInboxMessage({ source: `${source}-other` }));
      await store.inbox.claim({ sources: [source, `${source}-other`], batchSize: 5, ...LEASE });
      await expire('inbox', [id, otherId]);

      const report = await store.inbox.reclaimExpired([source]);

      expect(report).toEqual({ returned: 1, dead: 0 });
      expect(await store.inbox.get(id)).toMatchObject({
        state: 'Pending',
        attempt: 1,
        lastError: 'lease expired',
      });
      expect((await store.inbox.get(otherId))?.state).toBe('Processing');
    });

    it('forwards fresh claims into the outbox in item order and writes nothing for a stale one', async () => {
      const source = `forward-${target.name}`;
      const stored = [];
      for (let i = 0; i < 3; i++)
        stored.push(await store.inbox.store(anInboxMessage({ source, aggregateId: `agg${i}` })));
      const claimed = await store.inbox.claim({ sources: [source], batchSize: 5, ...LEASE });
      const [c0, c1, c2] = claimed;
      const item = (row: typeof c0, claimToken = row?.claimToken ?? '') => ({
        id: row?.id ?? '',
        claimToken,
        outbox: anOutboxMessage({
          topic: `t.${row?.aggregateId}`,
          key: row?.aggregateId ?? null,
          headers: { 'x-inbox-id': row?.id ?? '' },
          maxAttempts: 7,
        }),
      });

      const report = await store.inbox.forward([
        item(c2),
        item(c1, '00000000-0000-4000-8000-000000000000'),
        item(c0),
      ]);

      expect(report.settled).toEqual([
        { id: c2?.id, state: 'Sent' },
        { id: c0?.id, state: 'Sent' },
      ]);
      expect(report.stale).toEqual([c1?.id]);
      const written = await Promise.all(report.outboxIds.map((id) => store.outbox.get(id)));
      expect(written.map((r) => [r?.topic, r?.key, r?.headers, r?.maxAttempts, r?.state])).toEqual([
        ['t.agg2', 'agg2', { 'x-inbox-id': c2?.id }, 7, 'Pending'],
        ['t.agg0', 'agg0', { 'x-inbox-id': c0?.id }, 7, 'Pending'],
      ]);
      expect((await store.inbox.get(c0?.id ?? ''))?.processedAt).toBeInstanceOf(Date);
      expect((await store.inbox.get(c1?.id ?? ''))?.state).toBe('Processing');
    });
  });
}

describe('inbox store on PostgreSQL under concurrency', () => {
  let store: Store;
  beforeAll(async () => {
    store = createPostgresStore({ executor: createPgExecutor(testPool(8)), schema });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
  });

  it('stores a message once when eight senders deliver it at the same moment', async () => {
    const message = anInboxMessage({ source: 'race' });

    const results = await Promise.all(Array.from({ length: 8 }, () => store.inbox.store(message)));

    expect(results.filter((r) => r.status === 'stored')).toHaveLength(1);
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
  });

  it('groups stores made at the same moment into few insert statements (group commit)', async () => {
    // Prepare: a store whose executor counts the inbox inserts it runs.
    const counting = createPgExecutor(testPool(4));
    let inserts = 0;
    const counted: SqlExecutor = {
      ...counting,
      query: (text, values) => {
        if (/INSERT INTO \S+\.inbox\b/.test(text)) inserts++;
        return counting.query(text, values);
      },
    };
    const grouped = createPostgresStore({ executor: counted, schema });
    const messages = Array.from({ length: 60 }, () => anInboxMessage({ source: 'grouped' }));
    // Act
    const results = await Promise.all(messages.map((m) => grouped.inbox.store(m)));
    await grouped.close();
    // Assess: at most two statements run at once, so 60 stores take a handful of them, not 60.
    expect(results.every((r) => r.status === 'stored')).toBe(true);
    expect(new Set(results.map((r) => r.id)).size).toBe(60);
    expect(inserts).toBeGreaterThanOrEqual(1);
    expect(inserts).toBeLessThanOrEqual(4);
    for (const [i, result] of results.entries()) {
      expect((await store.inbox.get(result.id))?.idempotencyKey).toBe(messages[i]?.idempotencyKey);
    }
  });

  it('starts a second group-commit statement beside a running one only once 16 messages wait', async () => {
    // Prepare: a store whose inbox inserts wait at a gate until released, counted as they start.
    const gated = createPgExecutor(testPool(4));
    let started = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const held: SqlExecutor = {
      ...gated,
      query: async (text, values) => {
        if (/INSERT INTO \S+\.inbox\b/.test(text)) {
          started++;
          await gate;
        }
        return gated.query(text, values);
      },
    };
    const grouped = createPostgresStore({ executor: held, schema });
    const settle = () => new Promise((resolve) => setTimeout(resolve, 30));
    const store = (n: number) =>
      Array.from({ length: n }, () => grouped.inbox.store(anInboxMessage({ source: 'overlap' })));
    // Act and assess: one store starts a statement; 15 more wait for it; the 16th waiting one starts another.
    const first = store(1);
    await settle();
    expect(started).toBe(1);
    const waiting = store(15);
    await settle();
    expect(started).toBe(1);
    const more = store(1);
    await settle();
    expect(started).toBe(2);
    open();
    const results = await Promise.all([...first, ...waiting, ...more]);
    await grouped.close();
    expect(results.every((r) => r.status === 'stored')).toBe(true);
    expect(new Set(results.map((r) => r.id)).size).toBe(17);
  });

  it('two stores (two processes) writing the same messages in opposite orders store each once', async () => {
    // Prepare
    const other = createPostgresStore({ executor: createPgExecutor(testPool(4)), schema });
    const messages = Array.from({ length: 40 }, () => anInboxMessage({ source: 'crossed' }));
    // Act
    const [forward, backward] = await Promise.all([
      Promise.all(messages.map((m) => store.inbox.store(m))),
      Promise.all([...messages].reverse().map((m) => other.inbox.store(m))),
    ]);
    await other.close();
    // Assess
    backward.reverse();
    for (const [i, a] of forward.entries()) {
      const b = backward[i];
      expect(b?.id).toBe(a.id);
      expect([a.status, b?.status].sort()).toEqual(['duplicate', 'stored']);
    }
  });
});
