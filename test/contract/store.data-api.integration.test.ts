/**
 * The store contract on the RDS Data API executor: the real `@aws-sdk/client-rds-data` client against the local
 * Data API endpoint of test/data-api, which runs the calls on the PostgreSQL server `findPostgres()` found. The
 * hooks write to that server directly, as in store.postgres.test.ts.
 */
import { openDataApiStore } from '@queuebox/store-postgres';
import { findPostgres, freshSchemaName } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { type LocalDataApi, startLocalDataApi } from '../data-api/local-data-api.ts';
import { createPostgresHooks } from './postgres-hooks.ts';
import { describeStoreContract } from './store-contract.ts';

const postgres = await findPostgres();
const skipReason =
  postgres.provider === 'pglite'
    ? `no PostgreSQL server behind the local Data API endpoint: ${postgres.via}`
    : undefined;

let endpoint: LocalDataApi | undefined;
beforeAll(async () => {
  if (skipReason === undefined)
    endpoint = await startLocalDataApi({ postgresUrl: postgres.url, poolSize: 8 });
});
afterAll(async () => {
  await endpoint?.close();
});

describeStoreContract(
  'RDS Data API (local endpoint)',
  async () => {
    if (!endpoint) throw new Error('the local Data API endpoint did not start');
    const schema = freshSchemaName('store_dataapi');
    const store = await openDataApiStore({
      resourceArn: endpoint.resourceArn,
      secretArn: endpoint.secretArn,
      endpoint: endpoint.url,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      schema,
    });
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
  skipReason === undefined ? {} : { skipReason },
);
