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
import { createForeignVersionTable, createPostgresHooks } from './postgres-hooks.ts';
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
    const running = endpoint;
    const open = (on: string) =>
      openDataApiStore({
        resourceArn: running.resourceArn,
        secretArn: running.secretArn,
        endpoint: running.url,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
        schema: on,
      });
    const store = await open(schema);
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
      const other = freshSchemaName('store_dataapi_foreign');
      await createForeignVersionTable(query, other);
      const opened = await open(other);
      const drop = async () => {
        await opened.close();
        await createPostgresHooks(query, other).dropSchema();
      };
      return { store: opened, schema: other, drop };
    };
    // Large payloads come whole: the store reads them in chunks under the Data API's limits instead.
    return { store, schema, ...hooks, openOnForeignVersionTable, close, defersLargePayloads: false };
  },
  skipReason === undefined ? {} : { skipReason },
);
