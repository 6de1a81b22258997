import type { Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPostgresStore, type SqlExecutor } from '../src/index.ts';
import { anInboxMessage } from './messages.ts';
import { storeTargets } from './targets.ts';

const schema = freshSchemaName('pg_inbox_takeover');
dropSchemasAfterPass(() => [schema]);

const LEASE = { leaseMs: 60_000 };

const targets = storeTargets(schema, 4);

for (const target of targets) {
  describe(`inbox takeover on ${target.name}`, () => {
    let executor: SqlExecutor;
    let store: Store;
    const inbox = (table = 'inbox') => `"${target.schema}".${table}`;

    /** Moves the lease of the given rows `secondsAgo` into the past. */
    async function expire(ids: readonly string[], secondsAgo = 1): Promise<void> {
      await executor.query(
        `UPDATE ${inbox()} SET lease_until = now() - $2::int * interval '1 second' WHERE id = ANY($1::bigint[])`,
        [ids, secondsAgo],
      );
    }

    async function storeRows(source: string, count: number): Promise<string[]> {
      const ids: string[] = [];
      for (let i = 0; i < count; i += 1) ids.push((await store.inbox.store(anInboxMessage({ source }))).id);
      return ids;
    }

    const pullClaim = (source: string, batchSize: number) =>
      store.inbox.claim({ sources: [source], batchSize, ...LEASE, takeOverExpired: true });

    beforeAll(async () => {
      executor = target.executor();
      store = createPostgresStore({ executor, schema: target.schema });
      await store.migrate();
    });
    afterAll(async () => {
      await store.close();
    });
    beforeEach(async () => {
      await executor.query(`DELETE FROM ${inbox()}`);
    });

    it('takes over one expired row per claim, alone, even when the claim asks for more', async () => {
      // Prepare: a batch of four claimed and abandoned (its worker crashed); two rows pending since.
      const crashed = await storeRows('s', 4);
      expect(await pullClaim('s', 4)).toHaveLength(4);
      const pending = await storeRows('s', 2);
      await expire(crashed);
      // Act
      const claims = [];
      for (let i = 0; i < 5; i += 1) claims.push(await pullClaim('s', 10));
      // Assess: the abandoned rows one by one in id order (their leases expired together), each counting an
      // attempt with a token of its own; the pending rows once no expired row is left.
      expect(claims.map((rows) => rows.map((r) => [r.id, r.attempt]))).toEqual([
        [[crashed[0], 1]],
        [[crashed[1], 1]],
        [[crashed[2], 1]],
        [[crashed[3], 1]],
        pending.map((id) => [id, 0]),
      ]);
      expect(new Set(claims.slice(0, 4).map((rows) => rows[0]?.claimToken)).size).toBe(4);
    });

    it('takes over the oldest lease first', async () => {
      const [older = '', newer = ''] = await storeRows('s', 2);
      await pullClaim('s', 2);
      await expire([older], 1);
      await expire([newer], 60);

      expect((await pullClaim('s', 10)).map((r) => r.id)).toEqual([newer]);
      expect((await pullClaim('s', 10)).map((r) => r.id)).toEqual([older]);
    });

    it('claims pending rows as before when nothing is expired, and the relay claim never takes over', async () => {
      const [claimed = ''] = await storeRows('s', 1);
      await pullClaim('s', 1);
      await expire([claimed]);
      const pending = await storeRows('s', 3);

      const relay = await store.inbox.claim({ sources: ['s'], batchSize: 10, ...LEASE });
      await store.inbox.markProcessed(relay.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '' })));
      const takeover = await pullClaim('s', 10);

      expect(relay.map((r) => r.id)).toEqual(pending);
      expect(takeover.map((r) => [r.id, r.attempt])).toEqual([[claimed, 1]]);
    });

    it('takes over only rows of its own sources', async () => {
      const [mine = ''] = await storeRows('mine', 1);
      const [theirs = ''] = await storeRows('theirs', 1);
      await store.inbox.claim({ sources: ['mine', 'theirs'], batchSize: 2, ...LEASE });
      await expire([theirs], 60);
      await expire([mine], 1);

      expect((await pullClaim('mine', 10)).map((r) => r.id)).toEqual([mine]);
      expect(await pullClaim('mine', 10)).toEqual([]);
    });
  });
}
