/**
 * The relay's claim keeps the order of one aggregate id (migration 0006, `aggregateHead` in inbox-claim.ts): a row
 * with an aggregate id is claimed only when no row of its source and id with a smaller id is pending or processing,
 * so two relays (replicas), or one relay after a crash, never forward a later message of an id before an earlier
 * one. Pull workers' claims and rows without an aggregate id are unchanged.
 */
import type { RelayInboxRow, Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimInboxStatement } from '../src/inbox-claim.ts';
import { createPostgresStore, type SqlExecutor } from '../src/index.ts';
import { anInboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_relay_order');
dropSchemasAfterPass(() => [schema]);

const LEASE = { leaseMs: 60_000 };
const relayClaim = (batchSize: number, sources = ['s']) => ({ sources, batchSize, ...LEASE });

for (const target of storeTargets(schema, 4)) {
  describe(`the relay's claim and the order of one aggregate id on ${target.name}`, () => {
    let executor: SqlExecutor;
    let store: Store;
    const inbox = `"${target.schema}".inbox`;

    /** Stores one pending row per aggregate id given (null: none), in order; answers their ids. */
    async function storeRows(aggregateIds: readonly (string | null)[], source = 's'): Promise<string[]> {
      const ids: string[] = [];
      for (const aggregateId of aggregateIds) {
        ids.push((await store.inbox.store(anInboxMessage({ source, aggregateId }))).id);
      }
      return ids;
    }

    const forwardOf = (rows: readonly RelayInboxRow[]) =>
      rows.map((r) => ({
        id: r.id,
        claimToken: r.claimToken ?? '',
        outbox: { topic: 't', key: r.aggregateId, maxAttempts: 3 },
      }));
    const idsOf = (rows: readonly { id: string }[]) => rows.map((r) => r.id);

    beforeAll(async () => {
      executor = target.executor();
      store = createPostgresStore({ executor, schema: target.schema });
      await store.migrate();
    });
    afterAll(async () => {
      await store.close();
    });
    beforeEach(async () => {
      await executor.query(`DELETE FROM ${inbox}`);
      await executor.query(`DELETE FROM "${target.schema}".outbox`);
    });

    it('a second relay skips the next row of an aggregate id while the first holds the one before it', async () => {
      const [a1, a2, b1] = await storeRows(['k', 'k', 'm']);
      // Two relays (two replicas): the first claims a batch of one and has not forwarded it yet.
      const first = await store.inbox.claimForRelay(relayClaim(1));
      const second = await store.inbox.claimForRelay(relayClaim(10));
      const whileHeld = await store.inbox.claimForRelay(relayClaim(10));
      const report = await store.inbox.forward(forwardOf(first));
      const afterForward = await store.inbox.claimForRelay(relayClaim(10));
      const report2 = await store.inbox.forward(forwardOf(afterForward));

      expect(idsOf(first)).toEqual([a1]);
      expect(idsOf(second)).toEqual([b1]);
      expect(whileHeld).toEqual([]);
      expect(idsOf(afterForward)).toEqual([a2]);
      // a1's outbox row comes before a2's: the outbox delivers k in stored order.
      expect(Number(report2.outboxIds[0])).toBeGreaterThan(Number(report.outboxIds[0]));
    });

    it('takes only the oldest row of an aggregate id into one batch', async () => {
      const [a1, b1, a2, b2, a3] = await storeRows(['k', 'm', 'k', 'm', 'k']);

      const batches: string[][] = [];
      for (let i = 0; i < 3; i += 1) {
        const rows = await store.inbox.claimForRelay(relayClaim(10));
        batches.push(idsOf(rows));
        await store.inbox.forward(forwardOf(rows));
      }

      expect(batches).toEqual([[a1, b1], [a2, b2], [a3]]);
    });

    it('forwardAndClaim claims the next row of an aggregate id in the statement that forwards the one before', async () => {
      const [a1, a2, a3, b1] = await storeRows(['k', 'k', 'k', 'm']);
      const first = await store.inbox.claimForRelay(relayClaim(10));

      const step = await store.inbox.forwardAndClaim(forwardOf(first), relayClaim(10));
      const next = await store.inbox.forwardAndClaim(forwardOf(step.claimed), relayClaim(10));

      expect(idsOf(first)).toEqual([a1, b1]);
      expect(step.forwarded.settled.map((s) => s.id)).toEqual([a1, b1]);
      expect(idsOf(step.claimed)).toEqual([a2]);
      expect(idsOf(next.claimed)).toEqual([a3]);
    });

    it('a row a crash left processing holds its aggregate id back until the reclaim returns it, then goes first', async () => {
      const [a1, a2, b1] = await storeRows(['k', 'k', 'm']);
      const crashed = await store.inbox.claimForRelay(relayClaim(1));
      await executor.query(`UPDATE ${inbox} SET lease_until = now() - interval '1 second' WHERE id = $1`, [
        a1,
      ]);

      const beforeReclaim = await store.inbox.claimForRelay(relayClaim(10));
      const reclaimed = await store.inbox.reclaimExpired(['s']);
      const afterReclaim = await store.inbox.claimForRelay(relayClaim(10));
      await store.inbox.forward(forwardOf(afterReclaim));
      const last = await store.inbox.claimForRelay(relayClaim(10));

      expect(idsOf(crashed)).toEqual([a1]);
      expect(idsOf(beforeReclaim)).toEqual([b1]);
      expect(reclaimed).toMatchObject({ returned: 1, dead: 0 });
      expect(idsOf(afterReclaim)).toEqual([a1]);
      expect(idsOf(last)).toEqual([a2]);
    });

    it('claims rows without an aggregate id as before, a whole batch, between held-back rows', async () => {
      const [n1, a1, n2, a2, n3] = await storeRows([null, 'k', null, 'k', null]);
      const unkeyed = await storeRows([null, null, null]);

      const rows = await store.inbox.claimForRelay(relayClaim(10));

      expect(idsOf(rows)).toEqual([n1, a1, n2, n3, ...unkeyed]);
      expect(idsOf(rows)).not.toContain(a2);
    });

    it('compares aggregate ids exactly, per source: other case, trailing space or source hold nothing back', async () => {
      const ids = [
        ...(await storeRows(['k'])),
        ...(await storeRows(['K', 'k ', ' k'])),
        ...(await storeRows(['k'], 'other')),
      ];

      const rows = await store.inbox.claimForRelay(relayClaim(10, ['s', 'other']));

      expect(idsOf(rows)).toEqual(ids);
    });

    it('leaves pull workers as they were: due rows of one aggregate id are claimed together', async () => {
      const pulled = await storeRows(['k', 'k', 'k'], 'pull');
      const taken = await storeRows(['k', 'k'], 'pull2');

      const withTakeover = await store.inbox.claim({
        sources: ['pull'],
        batchSize: 10,
        ...LEASE,
        takeOverExpired: true,
      });
      const plain = await store.inbox.claim({ sources: ['pull2'], batchSize: 10, ...LEASE });

      expect(idsOf(withTakeover)).toEqual(pulled);
      expect(idsOf(plain)).toEqual(taken);
    });
  });
}

describe("the relay's claim on PostgreSQL with a claim in flight", () => {
  const target = storeTargets(schema, 4)[0];
  let executor: SqlExecutor;
  let store: Store;
  const inbox = `"${schema}".inbox`;

  beforeAll(async () => {
    executor = target?.executor() as SqlExecutor;
    store = createPostgresStore({ executor, schema });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
  });
  beforeEach(async () => {
    await executor.query(`DELETE FROM ${inbox}`);
  });

  it('skips the next row of an aggregate id while another claimer holds the one before, uncommitted', async () => {
    const ids: string[] = [];
    for (const aggregateId of ['k', 'k', 'm']) {
      ids.push((await store.inbox.store(anInboxMessage({ aggregateId }))).id);
    }
    const [k1, k2, m1] = ids;
    const holderPool = testPool(1);
    const holder = await holderPool.connect();
    try {
      // Another relay's claim has locked k1 and not committed yet: k1 is still pending in every other snapshot.
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM ${inbox} WHERE id = $1 FOR UPDATE`, [k1]);

      const whileLocked = await store.inbox.claimForRelay(relayClaim(10));
      await holder.query('ROLLBACK');
      const afterwards = await store.inbox.claimForRelay(relayClaim(10));

      expect(whileLocked.map((r) => r.id)).toEqual([m1]);
      expect(afterwards.map((r) => r.id)).toEqual([k1]);
      expect(afterwards.map((r) => r.id)).not.toContain(k2);
    } finally {
      holder.release();
      await holderPool.end();
    }
  });

  it('reads the earlier rows of an aggregate id from inbox_active_aggregate', async () => {
    const { text, values } = claimInboxStatement(schema, {
      sources: ['s'],
      batchSize: 10,
      leaseMs: 60_000,
      takeOverExpired: false,
      payload: false,
    });
    let plan = '';
    const rollBack = new Error('roll the explained claim back');
    await executor
      .transaction(async (tx) => {
        await tx.query('SET LOCAL enable_seqscan = off');
        const { rows } = await tx.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
        plan = JSON.stringify(rows[0]?.['QUERY PLAN']);
        throw rollBack;
      })
      .catch((error: unknown) => {
        if (error !== rollBack) throw error;
      });

    expect(plan).toContain('"Index Name":"inbox_active_aggregate"');
  });
});
