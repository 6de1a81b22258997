/**
 * One fixture for tests that open stores with other URLs (a driver option, another role) on one migrated schema:
 * the file's own schema, migrated before its tests and dropped after a pass; every store opened through `open` is
 * closed after each test.
 */
import type { Store } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName } from '@queuebox/testing';
import { afterEach, beforeAll } from 'vitest';
import { openPostgresStore } from '../../src/index.ts';

export interface MigratedSchema {
  readonly schema: string;
  /** A store on the schema through `url` (default the server's), closed after the test. */
  open(url?: string, poolSize?: number): Promise<Store>;
  /** Stores closed after the test; push one opened another way. */
  readonly opened: Store[];
  /** The server's URL with its `options` (start-up settings, as PGOPTIONS) set, or another query parameter. */
  withParam(name: string, value: string): string;
}

export function useMigratedSchema(url: string, prefix: string): MigratedSchema {
  const schema = freshSchemaName(prefix);
  dropSchemasAfterPass(() => [schema], url);
  const opened: Store[] = [];
  afterEach(async () => {
    for (const store of opened.splice(0)) await store.close();
  });
  beforeAll(async () => {
    const store = await openPostgresStore({ url, schema });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
  });
  return {
    schema,
    opened,
    async open(storeUrl = url, poolSize = 2) {
      const store = await openPostgresStore({ url: storeUrl, schema, poolSize });
      opened.push(store);
      return store;
    },
    withParam(name, value) {
      const parsed = new URL(url);
      parsed.searchParams.set(name, value);
      return parsed.toString();
    },
  };
}
