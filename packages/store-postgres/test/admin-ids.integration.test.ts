/**
 * The admin statements order rows by the id as a number, not as the text the rows carry it in: the identity is
 * restarted at 8 so the rows' ids cross from one digit to two (as text, "10" sorts before "8").
 */
import type { RowId, Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool, testPostgresUrl } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../src/store.ts';
import { anInboxMessage, anOutboxMessage } from './messages.ts';

const schema = freshSchemaName('pg_admin_ids');
dropSchemasAfterPass(() => [schema]);

describe('admin statements across a digit boundary of the ids', () => {
  const pool = testPool(1);
  let store: Store;
  let dead: RowId[];

  beforeAll(async () => {
    store = await openPostgresStore({ url: testPostgresUrl(), schema, poolSize: 2 });
    await store.migrate();
    await pool.query(`ALTER TABLE "${schema}".outbox ALTER COLUMN id RESTART WITH 8`);
    await pool.query(`ALTER TABLE "${schema}".inbox ALTER COLUMN id RESTART WITH 8`);
    dead = await store.outbox.insert(Array.from({ length: 5 }, () => anOutboxMessage()));
    const claimed = await store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    await store.outbox.markDead(
      claimed.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', reason: 'x' })),
    );
    for (let i = 0; i < 5; i++) await store.inbox.storeDead(anInboxMessage(), 'x');
  });
  afterAll(async () => {
    await store.close();
    await pool.end();
  });

  it('lists and pages in numeric id order', async () => {
    const first = await store.admin.list('outbox', { limit: 3 });
    const second = await store.admin.list('outbox', { limit: 3, cursor: first.nextCursor ?? '' });
    const inbox = await store.admin.list('inbox', { limit: 10 });

    expect(dead).toEqual(['8', '9', '10', '11', '12']);
    expect(first.rows.map((r) => r.id)).toEqual(['8', '9', '10']);
    expect(first.nextCursor).toBe('10');
    expect(second.rows.map((r) => r.id)).toEqual(['11', '12']);
    expect(inbox.rows.map((r) => r.id)).toEqual(['8', '9', '10', '11', '12']);
  });

  it('previews and requeues the lowest ids first, in numeric order', async () => {
    const preview = await store.admin.requeue('outbox', {}, { dryRun: true, batchSize: 3 });
    const batch = await store.admin.requeue('outbox', {}, { batchSize: 3 });

    expect(preview).toEqual({ dryRun: true, count: 5, ids: ['8', '9', '10'], more: true });
    expect(batch).toEqual({ dryRun: false, count: 3, ids: ['8', '9', '10'], more: true });
  });
});
