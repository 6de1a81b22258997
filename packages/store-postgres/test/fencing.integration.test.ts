/**
 * Fencing, reclaim and dedupe paths that the rest of the suite reached only in part (an outside mutation audit: a
 * settle without its token check, a reclaim one attempt early and a fallback insert answering 'stored' for a repeat
 * all passed every test). On PostgreSQL and PGlite.
 */
import type { RowId, Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeInboxRow } from '../src/inbox-dedupe.ts';
import { createPostgresStore, type SqlExecutor } from '../src/index.ts';
import { anInboxMessage, anOutboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_fencing');
dropSchemasAfterPass(() => [schema]);
const LEASE = { leaseMs: 60_000 };
/** A well-formed token that no claim gave. */
const WRONG = '00000000-0000-4000-8000-000000000000';

for (const target of storeTargets(schema, 2)) {
  describe(`fencing and reclaim on ${target.name}`, () => {
    let executor: SqlExecutor;
    let store: Store;
    const outbox = () => `"${target.schema}".outbox`;
    /** One claimed row, alone in the outbox (its id and token). */
    const claimOne = async (): Promise<{ id: RowId; token: string }> => {
      await executor.query(`DELETE FROM ${outbox()}`);
      await store.outbox.insert([anOutboxMessage({ maxAttempts: 3 })]);
      const [row] = await store.outbox.claim({ batchSize: 1, ...LEASE });
      if (!row?.claimToken) throw new Error('nothing claimed');
      return { id: row.id, token: row.claimToken };
    };

    beforeAll(async () => {
      executor = target.executor();
      store = createPostgresStore({ executor, schema: target.schema });
      await store.migrate();
    });
    afterAll(async () => store.close());

    it('a markSent of one claim for one destination (the common statement) with another token is stale', async () => {
      const { id } = await claimOne();
      expect(await store.outbox.markSent([{ id, claimToken: WRONG, destination: 'd' }])).toEqual({
        settled: [],
        stale: [id],
      });
      expect((await store.outbox.get(id))?.state).toBe('Processing');
    });

    it('a retry, a markDead and a release with another token are stale and change nothing', async () => {
      const retried = await claimOne();
      expect(
        await store.outbox.retry([{ id: retried.id, claimToken: WRONG, error: 'e', delayMs: 0 }]),
      ).toEqual({ settled: [], stale: [retried.id] });
      expect(await store.outbox.get(retried.id)).toMatchObject({ state: 'Processing', attempt: 0 });

      const dead = await claimOne();
      expect(await store.outbox.markDead([{ id: dead.id, claimToken: WRONG, reason: 'r' }])).toEqual({
        settled: [],
        stale: [dead.id],
      });
      expect((await store.outbox.get(dead.id))?.state).toBe('Processing');

      const released = await claimOne();
      expect(await store.outbox.release([{ id: released.id, claimToken: WRONG }])).toEqual({
        settled: [],
        stale: [released.id],
      });
      expect((await store.outbox.get(released.id))?.claimToken).toBe(released.token);
    });

    it('a reclaim returns an expired claim with attempts left to pending, counting its attempt (1 of 3 → 2)', async () => {
      // Prepare: attempt 1 of 3 done (a retry), claimed again, and its lease over.
      const first = await claimOne();
      await store.outbox.retry([{ id: first.id, claimToken: first.token, error: 'e', delayMs: 0 }]);
      const [again] = await store.outbox.claim({ batchSize: 1, ...LEASE });
      expect(again?.attempt).toBe(1);
      await executor.query(`UPDATE ${outbox()} SET lease_until = now() - interval '1 second' WHERE id = $1`, [
        first.id,
      ]);

      // Act
      const reclaimed = await store.outbox.reclaimExpired();

      // Assess
      expect(reclaimed).toEqual({ returned: 1, dead: 0 });
      expect(await store.outbox.get(first.id)).toMatchObject({
        state: 'Pending',
        attempt: 2,
        claimToken: null,
      });
    });

    it("the single-row insert a failed group commit falls back to answers 'duplicate' for a repeat", async () => {
      const item = { message: anInboxMessage(), state: 'pending' as const, lastError: null };
      const first = await storeInboxRow(executor, target.schema, item);
      expect(first.status).toBe('stored');
      expect(await storeInboxRow(executor, target.schema, item)).toEqual({
        status: 'duplicate',
        id: first.id,
      });
    });
  });
}
