/**
 * The store reads timestamps as ISO text. A session in another DateStyle (set for the database, the role, the
 * server, or by PGOPTIONS; here by the URL's `options`, which pg sends at start-up as PGOPTIONS would) made every
 * timestamp read as nothing, and every claimed row went dead as "unreadable row": all messages lost to the dead
 * letters, silently. The store now sets DateStyle ISO on each connection, and a timestamp that still reads as
 * nothing fails the read instead of dead-lettering the row.
 */
import { randomUUID } from 'node:crypto';
import { MessageState, StoreError } from '@queuebox/core';
import { readClaimedRows, SessionValueError } from '@queuebox/sql-store-common';
import { requireServices } from '@queuebox/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPgExecutor, createPostgresStore, openPostgresStore, storeTypeParser } from '../src/index.ts';
import { useMigratedSchema } from './support/migrated-schema.ts';

const needs = await requireServices('store-postgres: DateStyle', ['postgres']);

describe.skipIf(needs.skipReason)('a session whose DateStyle is not ISO', () => {
  const url = needs.url.postgres;
  const { schema, opened } = useMigratedSchema(url, 'pg_datestyle');

  const withDateStyle = (style: string) => {
    const parsed = new URL(url);
    parsed.searchParams.set('options', `-c DateStyle=${style}`);
    return parsed.toString();
  };

  it.each(['SQL,DMY', 'German', 'Postgres,MDY'])(
    'claims, reads and settles rows with their timestamps (DateStyle %s)',
    async (style) => {
      // Prepare
      const store = await openPostgresStore({ url: withDateStyle(style), schema, poolSize: 1 });
      opened.push(store);
      const topic = `datestyle.${randomUUID()}`;
      const before = Date.now();
      const [id] = await store.outbox.insert([{ topic, payload: { n: 1 }, headers: {}, maxAttempts: 3 }]);

      // Act
      const claimed = await store.outbox.claim({ batchSize: 100, leaseMs: 60_000 });
      const mine = claimed.filter((row) => row.topic === topic);
      const row = mine[0];
      if (row?.claimToken == null || id === undefined) throw new Error('not claimed');
      await store.outbox.markSent([{ id: row.id, claimToken: row.claimToken, destination: 'd' }]);

      // Assess
      expect(mine).toHaveLength(1);
      expect(row.createdAt.getTime()).toBeGreaterThan(before - 60_000);
      expect(row.createdAt.getTime()).toBeLessThan(Date.now() + 60_000);
      expect(row.leaseUntil?.getTime()).toBeGreaterThan(row.createdAt.getTime());
      expect((await store.outbox.get(id))?.state).toBe(MessageState.Sent);
    },
  );

  it("gives the claimed rows back untried when its own pool's session reads timestamps as nothing", async () => {
    // Prepare: the application's own pool (the store's parsers, not its connection set-up) in DateStyle SQL
    const pool = new pg.Pool({
      connectionString: withDateStyle('SQL,DMY'),
      max: 1,
      types: { getTypeParser: storeTypeParser },
    });
    const store = createPostgresStore({ executor: createPgExecutor(pool), schema, provider: 'postgres' });
    const [id] = await store.outbox.insert([
      { topic: `own-pool.${randomUUID()}`, payload: {}, headers: {}, maxAttempts: 3 },
    ]);
    try {
      // Act
      const claimed = store.outbox.claim({ batchSize: 100, leaseMs: 60_000 });

      // Assess: the read fails, and the row is pending again under no claim, no attempt counted (before: processing
      // until its lease ended, an attempt counted each time, then dead as "lease expired")
      await expect(claimed).rejects.toBeInstanceOf(SessionValueError);
      const reader = await openPostgresStore({ url, schema, poolSize: 1 });
      opened.push(reader);
      expect(await reader.outbox.get(id as string)).toMatchObject({
        state: MessageState.Pending,
        attempt: 0,
        claimToken: null,
      });
    } finally {
      await store.close();
    }
  });

  it('fails a read whose timestamp reads as nothing, rather than dead-letter the row', () => {
    // A NOT NULL timestamp that reads as null is the session's doing, whatever the row holds.
    const raw = [{ id: '7', claim_token: randomUUID() }];
    const toRow = () => {
      throw new SessionValueError('a timestamp column read as nothing');
    };
    const readers = { toRowId: (v: unknown) => String(v), toClaimToken: (v: unknown) => String(v) };
    expect(() => readClaimedRows(raw, toRow, readers)).toThrow(SessionValueError);
    const rowFault = () => {
      throw new StoreError('Expected a timestamp, got banana');
    };
    expect(readClaimedRows(raw, rowFault, readers).unreadable).toHaveLength(1);
  });
});
