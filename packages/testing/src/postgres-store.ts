/**
 * The PostgreSQL of the package integration tests: a pool on the test server, and a store migrated into a fresh
 * schema per test file (dropped after the file when it passed, kept and named when a test failed), with the few
 * plain-SQL reads and moves the assertions need that the store's ports do not offer.
 */
import type { InboxRow, RowId, Store, Table } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { planTestPostgresUrl, testPostgresUrl } from './postgres-url.ts';
import { dropPostgresSchemaStatement, useSchema, watchFailures } from './schema.ts';

/** A new pg pool of `max` connections (default 4) on `url` (default: `testPostgresUrl()`). */
export function testPool(max = 4, url = testPostgresUrl()): pg.Pool {
  return new pg.Pool({ connectionString: url, max });
}

/**
 * Creates the plan tests' database (`planTestPostgresUrl`) unless it exists, and answers its URL. Files running in
 * parallel may create it at once: the loser's duplicate (42P04, or 23505 on the catalog's unique index) is fine.
 */
export async function ensurePlanTestDatabase(): Promise<string> {
  const url = planTestPostgresUrl();
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  const client = new pg.Client(testPostgresUrl());
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount === 0) {
      await client
        .query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`)
        .catch((error: { code?: string }) => {
          if (error.code !== '42P04' && error.code !== '23505') throw error;
        });
    }
  } finally {
    await client.end();
  }
  return url;
}

/**
 * Registers, for the calling file, an `afterAll` that drops every schema `schemas()` names when every test passed
 * and keeps them (named on the console) when one failed. For files that create several schemas themselves.
 */
export function dropSchemasAfterPass(schemas: () => readonly string[], url = testPostgresUrl()): void {
  const watch = watchFailures();
  afterAll(async () => {
    const names = schemas();
    if (watch.failed) {
      console.info(`[test schema] keeping schemas ${names.join(', ')} for inspection: a test failed`);
      return;
    }
    const client = new pg.Client(url);
    await client.connect();
    try {
      for (const name of names) await client.query(dropPostgresSchemaStatement(name).text);
    } finally {
      await client.end();
    }
  });
}

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

/** Where `useTestStore` opens its store. */
export interface TestStoreOptions {
  /** Default: `testPostgresUrl()`. */
  readonly url?: string;
  /** Connections of the store's own pool (default 4). */
  readonly storePoolSize?: number;
  /** Connections of the file's plain-SQL pool, `pool` (default 2). */
  readonly poolSize?: number;
}

/** What a test file gets from `useTestStore`. */
export interface TestStore {
  /** The file's schema, `t_<prefix>_<random>`. */
  readonly schema: string;
  /** The store migrated into `schema` (opened in `beforeAll`). */
  readonly store: Store;
  /** A pool for plain SQL and for the application's transactions (`pool.connect()`), ended after the file. */
  readonly pool: pg.Pool;
  /** A new connected client, ended after the file. */
  connect(): Promise<pg.Client>;
  /** The outbox rows of a topic, by id (each test uses topics of its own). */
  outboxRows(topic: string): Promise<RawOutboxRow[]>;
  /** Every inbox row of a source, by id, read through the store. */
  inboxRows(source: string): Promise<InboxRow[]>;
  /** The number of inbox rows with this source and idempotency key. */
  countInbox(source: string, idempotencyKey: string): Promise<number>;
  /** The number of outbox rows. */
  countOutbox(): Promise<number>;
  /** Moves the lease of every processing inbox row into the past (instead of waiting for it); answers how many. */
  expireInboxLeases(): Promise<number>;
  /** Moves rows `ms` into the past (every timestamp), so age-based operations see them as old. */
  backdate(table: Table, ids: readonly RowId[], ms: number): Promise<void>;
  /** Deletes every row of both tables (between tests). */
  clear(): Promise<void>;
}

/**
 * Call at the top of a test file (or of a `describe`): a store migrated into a fresh schema before the tests; after
 * them the clients and the store close, the schema is dropped (kept and named when a test failed), the pool ends.
 */
export function useTestStore(prefix: string, options: TestStoreOptions = {}): TestStore {
  const url = options.url ?? testPostgresUrl();
  const pool = testPool(options.poolSize ?? 2, url);
  // afterAll hooks run in reverse order of registration: clients, store, schema, pool.
  afterAll(async () => {
    await pool.end();
  });
  const schema = useSchema(prefix, {
    drop: async (name) => {
      await pool.query(dropPostgresSchemaStatement(name).text);
    },
  });
  const s = `"${schema.name}"`;
  let store: Store | undefined;
  beforeAll(async () => {
    console.info(`[test store] PostgreSQL ${url}, schema ${schema.name}`);
    store = await openPostgresStore({ url, schema: schema.name, poolSize: options.storePoolSize ?? 4 });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });
  const clients: pg.Client[] = [];
  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => undefined);
  });
  const opened = (): Store => {
    if (!store) throw new Error('the store did not open (see the beforeAll error)');
    return store;
  };
  const count = async (text: string, values: unknown[] = []): Promise<number> => {
    const { rows } = await pool.query<{ n: number }>(text, values);
    return rows[0]?.n ?? 0;
  };

  return {
    schema: schema.name,
    pool,
    get store() {
      return opened();
    },
    async connect() {
      const client = new pg.Client({ connectionString: url });
      clients.push(client);
      await client.connect();
      return client;
    },
    async outboxRows(topic) {
      const { rows } = await pool.query<RawOutboxRow>(
        `SELECT id::text AS id, topic, key, payload, headers, state, attempt, max_attempts,
                (extract(epoch FROM scheduled_at - created_at) * 1000)::float8 AS delay_ms
         FROM ${s}.outbox o WHERE topic = $1 ORDER BY o.id`,
        [topic],
      );
      return rows;
    },
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
    countInbox(source, idempotencyKey) {
      return count(`SELECT count(*)::int AS n FROM ${s}.inbox WHERE source = $1 AND idempotency_key = $2`, [
        source,
        idempotencyKey,
      ]);
    },
    countOutbox() {
      return count(`SELECT count(*)::int AS n FROM ${s}.outbox`);
    },
    async expireInboxLeases() {
      const result = await pool.query(
        `UPDATE ${s}.inbox SET lease_until = now() - interval '1 second' WHERE state = 'processing'`,
      );
      return result.rowCount ?? 0;
    },
    async backdate(table, ids, ms) {
      const stamps =
        table === 'outbox'
          ? ['created_at', 'updated_at', 'scheduled_at', 'sent_at']
          : ['received_at', 'updated_at', 'scheduled_at', 'processed_at'];
      await pool.query(
        `UPDATE ${s}.${table} SET ${stamps
          .map((c) => `${c} = ${c} - $2::float8 * interval '1 millisecond'`)
          .join(', ')} WHERE id = ANY($1::bigint[])`,
        [ids, ms],
      );
    },
    async clear() {
      await pool.query(`DELETE FROM ${s}.outbox; DELETE FROM ${s}.inbox`);
    },
  };
}
