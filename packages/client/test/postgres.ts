/**
 * The real PostgreSQL of this package's integration tests: one fresh schema per test file, migrated by
 * store-postgres before the tests, dropped after them (kept and named on the console when a test failed), and
 * pg clients that stand for the application's connections.
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, afterEach, beforeAll } from 'vitest';

/** `QUEUEBOX_TEST_POSTGRES_URL`, else the machine's server. */
export const POSTGRES_URL =
  process.env.QUEUEBOX_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** One outbox row as the table holds it, read with plain SQL. */
export interface RawOutboxRow {
  id: string;
  topic: string;
  key: string | null;
  payload: unknown;
  headers: Record<string, string>;
  state: string;
  attempt: number;
  max_attempts: number;
  /** scheduled_at − created_at in milliseconds (both from one transaction's now()). */
  delay_ms: number;
}

/** What a test file gets. */
export interface TestDatabase {
  readonly schema: string;
  /** The migrated store of the schema. */
  readonly store: Store;
  /** A pool for the application's transactions (`pool.connect()`), ended after the file. */
  readonly pool: pg.Pool;
  /** A new connected client, ended after the file. */
  connect(): Promise<pg.Client>;
  /** The outbox rows of a topic, by id (each test uses topics of its own). */
  outboxRows(topic: string): Promise<RawOutboxRow[]>;
}

/** Call at the top of a test file. */
export function usePostgres(prefix: string): TestDatabase {
  const schema = `t_client_${prefix}_${randomBytes(4).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  const clients: pg.Client[] = [];
  let store: Store | undefined;
  let failed = false;

  beforeAll(async () => {
    console.info(`[client tests] PostgreSQL ${POSTGRES_URL}, schema ${schema}`);
    store = await openPostgresStore({ url: POSTGRES_URL, schema, poolSize: 2 });
    await store.migrate();
  });
  afterEach(({ task }) => {
    if (task.result?.state === 'fail') failed = true;
  });
  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => undefined);
    await store?.close();
    if (failed) console.info(`[client tests] keeping schema ${schema} for inspection: a test failed`);
    else await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  });

  return {
    schema,
    pool,
    get store() {
      if (!store) throw new Error('the store is opened in beforeAll');
      return store;
    },
    async connect() {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      clients.push(client);
      await client.connect();
      return client;
    },
    async outboxRows(topic) {
      const { rows } = await pool.query<RawOutboxRow>(
        `SELECT id::text AS id, topic, key, payload, headers, state, attempt, max_attempts,
                (extract(epoch FROM scheduled_at - created_at) * 1000)::float8 AS delay_ms
         FROM "${schema}".outbox o WHERE topic = $1 ORDER BY o.id`,
        [topic],
      );
      return rows;
    },
  };
}
