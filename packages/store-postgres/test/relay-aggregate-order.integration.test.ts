/**
 * The relay's claim and the order of one aggregate id on PostgreSQL and PGlite (`relayClaimCtes` in inbox-claim.ts,
 * migration 0006): what the store contract cannot arrange through the port — a claim another transaction holds
 * uncommitted, a busy id of thousands of rows, and the rows a claim reads as the backlog grows.
 */
import type { RelayInboxRow, Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimInboxStatement } from '../src/inbox-claim.ts';
import { createPgExecutor, createPostgresStore, type SqlExecutor } from '../src/index.ts';
import { anInboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_relay_order');
dropSchemasAfterPass(() => [schema]);

const LEASE = { leaseMs: 60_000 };
const relayClaim = (batchSize: number, sources = ['s']) => ({ sources, batchSize, ...LEASE });
const idsOf = (rows: readonly { id: string }[]) => rows.map((r) => r.id);
const forwardOf = (rows: readonly RelayInboxRow[]) =>
  rows.map((r) => ({
    id: r.id,
    claimToken: r.claimToken ?? '',
    outbox: { topic: 't', key: r.aggregateId, headers: { 'x-inbox-id': r.id }, maxAttempts: 3 },
  }));

/** Inserts `count` pending rows of source `s` and `aggregateId` with plain SQL; answers their ids, ascending. */
async function insertRows(
  executor: SqlExecutor,
  inSchema: string,
  aggregateId: string | null,
  count: number,
): Promise<string[]> {
  const { rows } = await executor.query<{ id: string }>(
    `INSERT INTO "${inSchema}".inbox (source, idempotency_key, aggregate_id, payload, max_attempts)
     SELECT 's', md5(random()::text) || g, $1::text, '{}', 3 FROM generate_series(1, $2::int) AS g
     RETURNING id::text AS id`,
    [aggregateId, count],
  );
  return rows.map((r) => r.id).sort((a, b) => Number(a) - Number(b));
}

for (const target of storeTargets(schema, 4)) {
  describe(`the relay's claim of a busy aggregate id on ${target.name}`, () => {
    let executor: SqlExecutor;
    let store: Store;

    beforeAll(async () => {
      executor = target.executor();
      store = createPostgresStore({ executor, schema: target.schema });
      await store.migrate();
    });
    afterAll(async () => {
      await store.close();
    });
    beforeEach(async () => {
      await executor.query(`DELETE FROM "${target.schema}".inbox`);
      await executor.query(`DELETE FROM "${target.schema}".outbox`);
    });

    it('moves 5,000 rows of one id in full batches of 100, in id order, while a second claimer waits', async () => {
      const ids = await insertRows(executor, target.schema, 'hot', 5000);

      // Relay A claims; relay B's claims meanwhile take nothing and say how many rows they left blocked.
      let batch = await store.inbox.claimForRelay(relayClaim(100));
      const batches = [idsOf(batch)];
      const waits: (number | undefined)[] = [];
      while (batch.length > 0) {
        const other = await store.inbox.claimForRelay(relayClaim(100));
        waits.push(other.length === 0 ? other.blocked : -other.length);
        const step = await store.inbox.forwardAndClaim(forwardOf(batch), relayClaim(100));
        batch = step.claimed;
        if (batch.length > 0) batches.push(idsOf(batch));
      }

      expect(batches).toHaveLength(50);
      expect(batches.flat()).toEqual(ids);
      expect(batches.every((b) => b.length === 100)).toBe(true);
      expect(waits).toEqual([...Array.from({ length: 49 }, () => 100), undefined]);
      const { rows } = await executor.query<{ ids: string[] }>(
        `SELECT array_agg(headers->>'x-inbox-id' ORDER BY id) AS ids FROM "${target.schema}".outbox WHERE key = 'hot'`,
      );
      expect(rows[0]?.ids).toEqual(ids);
    });
  });
}

describe("the relay's claim on PostgreSQL with other transactions", () => {
  let executor: SqlExecutor;
  let store: Store;
  const inbox = `"${schema}".inbox`;

  beforeAll(async () => {
    executor = createPgExecutor(testPool(4));
    store = createPostgresStore({ executor, schema });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
  });
  beforeEach(async () => {
    await executor.query(`DELETE FROM ${inbox}`);
  });

  /** Runs `act` while another connection holds `FOR UPDATE` locks on `ids`, uncommitted; then rolls it back. */
  async function whileLocked<T>(ids: readonly string[], act: () => Promise<T>): Promise<T> {
    const holderPool = testPool(1);
    const holder = await holderPool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM ${inbox} WHERE id = ANY ($1::bigint[]) FOR UPDATE`, [ids]);
      return await act();
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await holderPool.end();
    }
  }

  const storeOne = async (aggregateId: string | null) =>
    (await store.inbox.store(anInboxMessage({ aggregateId }))).id;

  it('leaves the later rows of an id pending while another transaction holds the earlier one, uncommitted', async () => {
    const x1 = await storeOne('x');
    const y1 = await storeOne('y');
    const x2 = await storeOne('x');
    const x3 = await storeOne('x');
    const bare = await storeOne(null);

    // Another relay's claim has locked x1 and not committed: x1 is pending in every other snapshot.
    const whileHeld = await whileLocked([x1], () => store.inbox.claimForRelay(relayClaim(10)));
    const afterwards = await store.inbox.claimForRelay(relayClaim(10));

    expect(idsOf(whileHeld)).toEqual([y1, bare]);
    expect(whileHeld.blocked).toBe(2);
    expect(idsOf(afterwards)).toEqual([x1, x2, x3]);
    expect(afterwards.blocked).toBeUndefined();
  });

  it('does not take a requeued head another transaction holds: its id waits; once released it goes first', async () => {
    const [x1] = await insertRows(executor, schema, 'x', 1);
    await executor.query(`UPDATE ${inbox} SET state = 'dead' WHERE id = $1`, [x1]);
    const backlog = await insertRows(executor, schema, 'x', 4);
    await executor.query(`UPDATE ${inbox} SET scheduled_at = now() - interval '1 minute' WHERE id <> $1`, [
      x1,
    ]);
    // An operator's requeue: x1 is pending again, scheduled now, after the backlog of its id.
    await executor.query(
      `UPDATE ${inbox} SET state = 'pending', attempt = 0, scheduled_at = now() WHERE id = $1`,
      [x1],
    );

    const whileHeld = await whileLocked([x1 as string], () => store.inbox.claimForRelay(relayClaim(3)));
    const head = await store.inbox.claimForRelay(relayClaim(3));
    const rest = await store.inbox.forwardAndClaim(forwardOf(head), relayClaim(10));

    expect(whileHeld).toHaveLength(0);
    expect(whileHeld.blocked).toBe(3);
    expect(idsOf(head)).toEqual([x1]);
    expect(idsOf(rest.claimed)).toEqual(backlog);
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

  /** The plan of the relay's claim of 100, run and rolled back: rows touched and the indexes it read. */
  async function measuredClaim(): Promise<{ touched: number; plan: string }> {
    const { text, values } = claimInboxStatement(schema, {
      sources: ['s'],
      batchSize: 100,
      leaseMs: 60_000,
      takeOverExpired: false,
      payload: false,
    });
    let measured = { touched: 0, plan: '' };
    const rollBack = new Error('roll the measured claim back');
    await executor
      .transaction(async (tx) => {
        const { rows } = await tx.query<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
          values,
        );
        const plan = rows[0]?.['QUERY PLAN'][0].Plan as Record<string, unknown>;
        measured = { touched: rowsTouched(plan), plan: JSON.stringify(plan) };
        throw rollBack;
      })
      .catch((error: unknown) => {
        if (error !== rollBack) throw error;
      });
    return measured;
  }

  /**
   * One busy id of `backlog` pending rows after a history of 5,000 processed rows (a third of them of the same id),
   * measured four ways: its oldest row processing (another relay holds it: the window is all blocked), none
   * processing (the window is claimable), an old row requeued behind it (the head is claimed), and half the
   * backlog processed after the statistics were taken on the backlog alone.
   */
  async function measure(backlog: number) {
    await executor.query(`DELETE FROM ${inbox}`);
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, aggregate_id, payload, max_attempts, state, processed_at)
       SELECT 's', 'h' || g, CASE WHEN g % 3 = 0 THEN 'hot' ELSE 'k' || (g % 100) END, '{}', 3, 'processed', now()
       FROM generate_series(1, 5000) AS g`,
    );
    const [x1] = await insertRows(executor, schema, 'hot', 1);
    const rows = await insertRows(executor, schema, 'hot', backlog);
    await insertRows(executor, schema, null, 50);
    await executor.query(`ANALYZE ${inbox}`);
    await executor.query(
      `UPDATE ${inbox} SET state = 'processing', lease_until = now() + interval '1 hour' WHERE id = $1`,
      [x1],
    );
    const blocked = await measuredClaim();
    await executor.query(`UPDATE ${inbox} SET state = 'processed', lease_until = NULL WHERE id = $1`, [x1]);
    const free = await measuredClaim();
    await executor.query(`UPDATE ${inbox} SET state = 'pending', scheduled_at = now() WHERE id = $1`, [x1]);
    const requeued = await measuredClaim();
    // Half the backlog forwarded since the statistics were taken, on a table that held only that backlog: they
    // make a walk of the primary key from the smallest id look cheap, and that walk reads every processed row.
    await executor.query(`DELETE FROM ${inbox} WHERE state = 'processed' OR aggregate_id <> 'hot'`);
    await executor.query(`ANALYZE ${inbox}`);
    await executor.query(`UPDATE ${inbox} SET state = 'processed' WHERE id <= $1`, [rows[backlog / 2]]);
    const stale = await measuredClaim();
    return { blocked, free, requeued, stale };
  }

  it('reads about a batch of rows per claim, however long the backlog of one id is (plan rows, 1,000 vs 20,000; the reverted filter read all of them)', async () => {
    const small = await measure(1000);
    const large = await measure(20_000);

    for (const kind of ['blocked', 'free', 'requeued', 'stale'] as const) {
      // The filter of the reverted claim read every row of the backlog; this one reads the window and one chain.
      expect(large[kind].touched, kind).toBeLessThanOrEqual(small[kind].touched + 20);
      expect(large[kind].touched, kind).toBeLessThan(5000);
      expect(large[kind].plan, kind).toContain('"Index Name":"inbox_active_aggregate"');
    }
  });
});
