/**
 * The real PostgreSQL store of this package's integration tests: found by test/services.ts, migrated into a
 * fresh schema per file (dropped after the file when it passed, kept and named when it failed), plus a pool for
 * what the port cannot arrange (moving rows back in time).
 */
import type { RowId, Store, Table } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { dropPostgresSchemaStatement, useSchema } from '../../../test/schema.ts';
import { findPostgres } from '../../../test/services.ts';

const postgres = await findPostgres();

/** Why the file's tests are skipped, or undefined when a PostgreSQL server answered. */
export const skipReason =
  postgres.provider === 'postgres' ? undefined : `no PostgreSQL server (${postgres.via})`;
if (skipReason) console.info(`[admin tests] PostgreSQL tests skipped: ${skipReason}`);

/** A migrated store in the file's own schema; call at the top of a `describe.skipIf(skipReason)` block. */
export function usePostgresStore(prefix: string) {
  const pool = new pg.Pool({ connectionString: postgres.url, max: 2 });
  const schema = useSchema(prefix, {
    // Its own connection: the file's pool is closed by then.
    drop: async (name) => {
      const client = new pg.Client(postgres.url);
      await client.connect();
      try {
        await client.query(dropPostgresSchemaStatement(name).text);
      } finally {
        await client.end();
      }
    },
  });
  let store: Store | undefined;
  beforeAll(async () => {
    store = await openPostgresStore({ url: postgres.url, schema: schema.name, poolSize: 4 });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
    await pool.end();
  });
  const opened = (): Store => {
    if (!store) throw new Error('the store did not open (see the beforeAll error)');
    return store;
  };
  return {
    get store() {
      return opened();
    },
    /** Moves rows `ms` into the past (every timestamp), so age-based operations see them as old. */
    async backdate(table: Table, ids: readonly RowId[], ms: number): Promise<void> {
      const stamps =
        table === 'outbox'
          ? ['created_at', 'updated_at', 'scheduled_at', 'sent_at']
          : ['received_at', 'updated_at', 'scheduled_at', 'processed_at'];
      await pool.query(
        `UPDATE "${schema.name}".${table} SET ${stamps
          .map((c) => `${c} = ${c} - $2::float8 * interval '1 millisecond'`)
          .join(', ')} WHERE id = ANY($1::bigint[])`,
        [ids, ms],
      );
    },
    /** Deletes every row of both tables (between tests). */
    async clear(): Promise<void> {
      await pool.query(`DELETE FROM "${schema.name}".outbox; DELETE FROM "${schema.name}".inbox`);
    },
  };
}
