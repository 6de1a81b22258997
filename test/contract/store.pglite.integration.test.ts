/**
 * The store contract on the embedded PGlite, in memory. `openPgliteStore` keeps its PGlite to itself, so the
 * harness opens the PGlite and builds the same store over it with `createPostgresStore`, and the hooks share
 * that one session (PGlite is a single session; a second connection is not an option).
 */
import { PGlite } from '@electric-sql/pglite';
import { createPgliteExecutor, createPostgresStore, openPgliteStore } from '@queuebox/store-postgres';
import { freshSchemaName } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createForeignVersionTable, createPostgresHooks } from './postgres-hooks.ts';
import { describeStoreContract } from './store-contract.ts';

describeStoreContract('PGlite', async () => {
  const schema = freshSchemaName('store_pglite');
  const executor = createPgliteExecutor(await PGlite.create());
  const store = createPostgresStore({ executor, schema, provider: 'pglite' });
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  const query = (text: string, values?: readonly unknown[]) => executor.query(text, values ?? []);
  const hooks = createPostgresHooks(query, schema);
  const openOnForeignVersionTable = async () => {
    const other = freshSchemaName('store_pglite_foreign');
    await createForeignVersionTable(query, other);
    // On the one PGlite session: not closed (closing a store closes its executor), only the schema is dropped.
    const opened = createPostgresStore({ executor, schema: other, provider: 'pglite' });
    return { store: opened, schema: other, drop: () => createPostgresHooks(query, other).dropSchema() };
  };
  return { store, schema, ...hooks, openOnForeignVersionTable, close: () => store.close() };
});

describe('openPgliteStore', () => {
  it('opens an in-memory store that migrates and answers', async () => {
    const store = await openPgliteStore({ schema: freshSchemaName('open_pglite') });
    try {
      const report = await store.migrate();

      expect(store.provider).toBe('pglite');
      expect(report.current).toBeGreaterThanOrEqual(1);
      await store.ping();
      const [id] = (await store.outbox.insert([{ topic: 't', payload: { a: 1 }, maxAttempts: 1 }])) as [
        string,
      ];
      expect((await store.outbox.get(id))?.payload).toEqual({ a: 1 });
    } finally {
      await store.close();
    }
  });
});
