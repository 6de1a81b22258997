/**
 * One fixture for the Data API tests: a file's own schema on the real PostgreSQL, the local Data API endpoint over it,
 * and a store opened through the real SDK client, migrated before the file's tests and closed after them.
 */
import type { Store } from '@queuebox/core';
import { openDataApiStore } from '@queuebox/store-postgres';
import { usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll } from 'vitest';
import { type LocalDataApi, startLocalDataApi } from './local-data-api.ts';

export interface DataApiStoreFixture {
  /** A pool on the schema's database, for set-up and assertions in SQL. */
  readonly pool: ReturnType<typeof usePostgresSchema>['pool'];
  readonly schema: ReturnType<typeof usePostgresSchema>['schema'];
  /** The store through the Data API (set once the file's `beforeAll` ran). */
  readonly store: Store;
  readonly endpoint: LocalDataApi;
}

export function useDataApiStore(postgresUrl: string, prefix: string): DataApiStoreFixture {
  const { pool, schema } = usePostgresSchema(postgresUrl, prefix, 2);
  let endpoint: LocalDataApi | undefined;
  let store: Store | undefined;

  beforeAll(async () => {
    endpoint = await startLocalDataApi({ postgresUrl, poolSize: 4 });
    store = await openDataApiStore({
      resourceArn: endpoint.resourceArn,
      secretArn: endpoint.secretArn,
      endpoint: endpoint.url,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      schema: schema.name,
    });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
    await endpoint?.close();
  });

  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the Data API ${what} is used before beforeAll`);
    return value;
  };
  return {
    pool,
    schema,
    get store() {
      return started(store, 'store');
    },
    get endpoint() {
      return started(endpoint, 'endpoint');
    },
  };
}
