/** The store contract against a real PostgreSQL server, found by @queuebox/testing (findPostgres). */

import { findPostgres, freshSchemaName } from '@queuebox/testing';
import pg from 'pg';
import { createPostgresHooks } from './postgres-hooks.ts';
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
    const hooks = createPostgresHooks((text, values) => pool.query(text, values ? [...values] : []), schema);
    return { store, schema, ...hooks, close };
  },
  {
    skipReason:
      postgres.provider === 'pglite'
        ? `no PostgreSQL server: ${postgres.via}; store.pglite.integration.test.ts runs the contract on the embedded store`
        : undefined,
  },
);
