/**
 * The real PostgreSQL store for the integration tests of this package: one fresh schema per test file, migrated
 * before the tests and dropped after them (kept and named on the console when a test failed).
 */

import { randomBytes } from 'node:crypto';
import type { InboxRow, Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, afterEach, beforeAll } from 'vitest';

/** `QUEUEBOX_TEST_POSTGRES_URL`, else the machine's server. */
export const POSTGRES_URL =
  process.env.QUEUEBOX_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The store of the current test file and a few read-only SQL helpers for assertions. */
export interface TestStore {
  readonly store: Store;
  readonly schema: string;
  /** Every inbox row of a source, by id. */
  inboxRows(source: string): Promise<InboxRow[]>;
  /** The number of inbox rows with this source and idempotency key. */
  countInbox(source: string, idempotencyKey: string): Promise<number>;
  /** The number of outbox rows. */
  countOutbox(): Promise<number>;
  /** Moves the lease of every processing inbox row into the past (instead of waiting for it). */
  expireInboxLeases(): Promise<number>;
}

/** Call at the top of a test file. */
export function usePostgresStore(prefix: string): TestStore {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  // Hooks run in reverse order of registration: close the store, then drop the schema, then end the pool.
  afterAll(async () => {
    await pool.end();
  });
  const schema = { name: `t_${prefix}_${randomBytes(5).toString('hex')}`, failed: false };
  afterEach(({ task }) => {
    if (task.result?.state === 'fail') schema.failed = true;
  });
  afterAll(async () => {
    if (schema.failed)
      console.info(`[inbox tests] keeping schema ${schema.name} for inspection: a test failed`);
    else await pool.query(`DROP SCHEMA IF EXISTS "${schema.name}" CASCADE`);
  });
  const s = `"${schema.name}"`;
  let store: Store | undefined;
  beforeAll(async () => {
    console.info(`[inbox tests] PostgreSQL ${POSTGRES_URL}, schema ${schema.name}`);
    store = await openPostgresStore({ url: POSTGRES_URL, schema: schema.name });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });
  const opened = (): Store => {
    if (!store) throw new Error('the store is opened in beforeAll');
    return store;
  };
  return {
    get store() {
      return opened();
    },
    schema: schema.name,
    async inboxRows(source) {
      const { rows } = await pool.query<{ id: string }>(
        `SELECT id::text AS id FROM ${s}.inbox WHERE source = $1 ORDER BY id`,
        [source],
      );
      const found: InboxRow[] = [];
      for (const { id } of rows) {
        const row = await opened().inbox.get(id);
        if (row) found.push(row);
      }
      return found;
    },
    async countInbox(source, idempotencyKey) {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${s}.inbox WHERE source = $1 AND idempotency_key = $2`,
        [source, idempotencyKey],
      );
      return rows[0]?.n ?? 0;
    },
    async countOutbox() {
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.outbox`);
      return rows[0]?.n ?? 0;
    },
    async expireInboxLeases() {
      const result = await pool.query(
        `UPDATE ${s}.inbox SET lease_until = now() - interval '1 second' WHERE state = 'processing'`,
      );
      return result.rowCount ?? 0;
    },
  };
}
