/** The store contract against a real PostgreSQL server, found by @queuebox/testing (findPostgres). */

import { findPostgres, freshSchemaName } from '@queuebox/testing';
import pg from 'pg';
import { createForeignVersionTable, createPostgresHooks } from './postgres-hooks.ts';
import { describeStoreContract } from './store-contract.ts';

const postgres = await findPostgres();

describeStoreContract(
  'PostgreSQL',
  async () => {
    const { openPostgresStore } = await import('@queuebox/store-postgres');
    const schema = freshSchemaName('store_pg');
    const store = await openPostgresStore({ url: postgres.url, schema, poolSize: 8 });
    const pool = new pg.Pool({ connectionString: postgres.url, max: 2 });
    const close = async () => {
      await Promise.allSettled([store.close(), pool.end()]);
    };
    try {
      await store.migrate();
    } catch (error) {
      await close();
      throw error;
    }
    const query = (text: string, values?: readonly unknown[]) => pool.query(text, values ? [...values] : []);
    const hooks = createPostgresHooks(query, schema);
    const openOnForeignVersionTable = async () => {
      const other = freshSchemaName('store_pg_foreign');
      await createForeignVersionTable(query, other);
      const opened = await openPostgresStore({ url: postgres.url, schema: other, poolSize: 1 });
      const drop = async () => {
        await opened.close();
        await createPostgresHooks(query, other).dropSchema();
      };
      return { store: opened, schema: other, drop };
    };
    return { store, schema, ...hooks, openOnForeignVersionTable, close };
  },
  {
    skipReason:
      postgres.provider === 'pglite'
        ? `no PostgreSQL server: ${postgres.via}; store.pglite.integration.test.ts runs the contract on the embedded store`
        : undefined,
  },
);
