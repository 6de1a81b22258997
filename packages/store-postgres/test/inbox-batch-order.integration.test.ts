/**
 * The inbox group commit draws ids in the order the stores were called, whatever order it locks the keys in: the
 * relay forwards the rows of one aggregate id in id order, and a broker source hands several deliveries of one queue
 * to the store at once. An outside soak saw a RabbitMQ source's messages `…-2` … `…-10` of one aggregate stored with
 * ids in the key text's order (`…-10` before `…-2`), and delivered so, without any fault.
 */
import type { Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, requireServices } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../src/index.ts';
import { anInboxMessage } from './messages.ts';

const needs = await requireServices('store-postgres: inbox group commit order', ['postgres']);

describe.skipIf(needs.skipReason)('inbox group commit', () => {
  const url = needs.url.postgres;
  const schema = freshSchemaName('inbox_call_order');
  dropSchemasAfterPass(() => [schema], url);
  let store: Store;

  beforeAll(async () => {
    store = await openPostgresStore({ url, schema });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('gives the stores of one statement ids in the order they were called, not in their keys order', async () => {
    // Prepare: keys whose text order is not the call order (`m-10` sorts before `m-2`), and a repeat among them
    const calls = [3, 10, 2, 11, 1, 20, 9].map((n) =>
      anInboxMessage({ source: 'order', idempotencyKey: `m-${n}`, aggregateId: 'a-1', payload: { n } }),
    );
    // Act: called in one turn, so they go in one statement
    const results = await Promise.all(calls.map((message) => store.inbox.store(message)));
    // Assess: every one stored, ids ascending in call order
    expect(results.map((r) => r.status)).toEqual(calls.map(() => 'stored'));
    const ids = results.map((r) => BigInt(r.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    // …and one statement wrote them all (its ids are consecutive)
    const admin = new pg.Client(url);
    await admin.connect();
    try {
      const { rows } = await admin.query<{ xmins: string }>(
        `SELECT count(DISTINCT xmin::text)::text AS xmins FROM "${schema}".inbox WHERE source = 'order'`,
      );
      expect(rows[0]?.xmins).toBe('1');
    } finally {
      await admin.end();
    }
  });
});
