/**
 * The relay's claim that skips held aggregate ids (`RelayClaimOptions.skipAggregatesOf`, `skippedCtes` in
 * inbox-claim.ts) on PostgreSQL and PGlite: the forward-and-claim statement skips them too and does not report an id
 * whose holding row it forwards itself; the plain claim's text has no trace of skipping; and the rows a skipping claim
 * reads to get past a held id are bounded (MAX_SKIP_SCAN_ROWS). The semantics every store shares are in
 * test/contract/inbox-relay-order-contract.ts; the relay's use of them in packages/inbox/test.
 */
import { MAX_SKIP_SCAN_ROWS, type RelayInboxRow, type Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimInboxStatement, forwardAndClaimInboxStatement } from '../src/inbox-claim.ts';
import { createPgExecutor, createPostgresStore, type SqlExecutor } from '../src/index.ts';
import { anInboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_relay_skip');
dropSchemasAfterPass(() => [schema]);

const relayClaim = (batchSize: number, skipAggregatesOf?: readonly string[]) => ({
  sources: ['s'],
  batchSize,
  leaseMs: 60_000,
  ...(skipAggregatesOf === undefined ? {} : { skipAggregatesOf }),
});
const idsOf = (rows: readonly { id: string }[]) => rows.map((r) => r.id);
const forwardOf = (rows: readonly RelayInboxRow[]) =>
  rows.map((r) => ({
    id: r.id,
    claimToken: r.claimToken ?? '',
    outbox: { topic: 't', key: r.aggregateId, headers: { 'x-inbox-id': r.id }, maxAttempts: 3 },
  }));

for (const target of storeTargets(schema, 4)) {
  describe(`the relay's forward-and-claim that skips held ids on ${target.name}`, () => {
    let executor: SqlExecutor;
    let store: Store;
    const storeOne = async (aggregateId: string | null) =>
      (await store.inbox.store(anInboxMessage({ aggregateId }))).id;
    const storeMany = async (aggregateId: string | null, count: number) => {
      const ids: string[] = [];
      for (let i = 0; i < count; i += 1) ids.push(await storeOne(aggregateId));
      return ids;
    };

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

    it('skips the held ids in the claim of the statement that forwards, and goes on naming them while they are held', async () => {
      // A crashed relay holds x1; relay R holds a batch of y; x's later rows fill a window of 3; then z's rows.
      const [x1] = await storeMany('x', 1);
      const crashed = await store.inbox.claimForRelay(relayClaim(1));
      const ys = await storeMany('y', 2);
      const held = await store.inbox.claimForRelay(relayClaim(2));
      const xs = await storeMany('x', 3);
      const zs = await storeMany('z', 2);
      const full = await store.inbox.claimForRelay(relayClaim(3));

      // R forwards its batch and claims the next, skipping what `full` named; then once more without skipping.
      const step = await store.inbox.forwardAndClaim(forwardOf(held), relayClaim(3, full.blockedBy));
      const plain = await store.inbox.forwardAndClaim(forwardOf(step.claimed), relayClaim(3));

      expect(idsOf(crashed)).toEqual([x1]);
      expect(idsOf(held)).toEqual(ys);
      expect(full).toHaveLength(0);
      expect(full.blockedBy).toEqual([x1]);
      expect(step.forwarded.settled.map((s) => s.id)).toEqual(ys);
      expect(idsOf(step.claimed)).toEqual(zs);
      expect(step.claimed.blocked).toBeUndefined();
      expect(step.claimed.blockedBy).toEqual([x1]);
      expect(idsOf(plain.claimed)).toEqual([]);
      expect(plain.claimed.blocked).toBe(xs.length);
      expect(plain.claimed.blockedBy).toEqual([x1]);
    });

    it('does not name a skipped id whose holding row it forwards itself: the next claim takes its later rows, in order', async () => {
      const [x1] = await storeMany('x', 1);
      const mine = await store.inbox.claimForRelay(relayClaim(1));
      const xs = await storeMany('x', 3);
      const full = await store.inbox.claimForRelay(relayClaim(3));

      const step = await store.inbox.forwardAndClaim(forwardOf(mine), relayClaim(3, full.blockedBy));
      const next = await store.inbox.claimForRelay(relayClaim(3, step.claimed.blockedBy));

      expect(full.blockedBy).toEqual([x1]);
      expect(step.forwarded.settled.map((s) => s.id)).toEqual([x1]);
      expect(idsOf(step.claimed)).toEqual([]);
      expect(step.claimed.blockedBy).toBeUndefined();
      expect(idsOf(next)).toEqual(xs);
    });
  });
}

describe("the relay's claim that skips held ids on PostgreSQL", () => {
  let executor: SqlExecutor;
  let store: Store;
  const inbox = `"${schema}".inbox`;

  beforeAll(async () => {
    executor = createPgExecutor(testPool(2));
    store = createPostgresStore({ executor, schema });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
  });
  beforeEach(async () => {
    await executor.query(`DELETE FROM ${inbox}`);
  });

  it('is the plain statement, parameters and all, when nothing is skipped', () => {
    const claim = { sources: ['s'], batchSize: 100, leaseMs: 1000, takeOverExpired: false, payload: false };
    const item = {
      id: '1',
      claimToken: '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d',
      outbox: { topic: 't', key: 'x', headers: {}, maxAttempts: 3 },
    };
    for (const skip of [undefined, []]) {
      const p = { ...claim, ...(skip === undefined ? {} : { skipAggregatesOf: skip }) };
      const plain = claimInboxStatement(schema, p);
      const step = forwardAndClaimInboxStatement(schema, [item], p);
      expect(plain.values).toEqual([['s'], 100, 1000]);
      expect(step.values).toHaveLength(11);
      for (const text of [plain.text, step.text]) {
        expect(text).not.toContain('skipped');
        expect(text).not.toContain('held');
        expect(text).toContain('LIMIT $');
        expect(text).not.toContain(`LIMIT ${MAX_SKIP_SCAN_ROWS}`);
      }
    }
    const skipping = claimInboxStatement(schema, { ...claim, skipAggregatesOf: ['7'] });
    expect(skipping.values).toEqual([['s'], 100, 1000, ['7']]);
    expect(skipping.text).toContain(`LIMIT ${MAX_SKIP_SCAN_ROWS}\n`);
    expect(
      forwardAndClaimInboxStatement(schema, [item], { ...claim, skipAggregatesOf: ['7'] }).values[11],
    ).toEqual(['7']);
  });

  it(`reads at most MAX_SKIP_SCAN_ROWS (${MAX_SKIP_SCAN_ROWS}) due rows to get past a held id`, async () => {
    // x1 is held; MAX_SKIP_SCAN_ROWS - 1 rows of x, then y1: y1 is the last row the scan reads.
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, aggregate_id, payload, max_attempts, state, lease_until)
       VALUES ('s', 'x1', 'x', '{}', 3, 'processing', now() + interval '1 hour')`,
    );
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, aggregate_id, payload, max_attempts, scheduled_at)
       SELECT 's', 'x' || g, 'x', '{}', 3, now() - interval '1 hour' + g * interval '1 millisecond'
       FROM generate_series(2, $1::int) AS g`,
      [MAX_SKIP_SCAN_ROWS],
    );
    const { rows } = await executor.query<{ id: string }>(
      `INSERT INTO ${inbox} (source, idempotency_key, aggregate_id, payload, max_attempts, scheduled_at)
       VALUES ('s', 'y1', 'y', '{}', 3, now() - interval '1 minute') RETURNING id::text AS id`,
    );
    const y1 = rows[0]?.id as string;
    const x1 = (
      await executor.query<{ id: string }>(`SELECT id::text AS id FROM ${inbox} WHERE idempotency_key = 'x1'`)
    ).rows[0]?.id as string;
    await executor.query(`ANALYZE ${inbox}`);

    const full = await store.inbox.claimForRelay(relayClaim(100));
    const reached = await store.inbox.claimForRelay(relayClaim(100, full.blockedBy));
    // One more row of x ahead of y2: y2 is one row past the scan's bound.
    await executor.query(
      `INSERT INTO ${inbox} (source, idempotency_key, aggregate_id, payload, max_attempts, scheduled_at)
       VALUES ('s', 'x0', 'x', '{}', 3, now() - interval '2 hours'),
              ('s', 'y2', 'y', '{}', 3, now() - interval '1 minute')`,
    );
    const beyond = await store.inbox.claimForRelay(relayClaim(100, [x1]));

    expect(full).toHaveLength(0);
    expect(full.blockedBy).toEqual([x1]);
    expect(idsOf(reached)).toEqual([y1]);
    expect(reached.blockedBy).toEqual([x1]);
    expect(beyond).toHaveLength(0);
    expect(beyond.blockedBy).toEqual([x1]);
  });
});
