/**
 * A real PostgreSQL store for broker tests: the server `requireServices` found, a fresh schema per test file,
 * migrated before the tests, dropped after them (kept and named when a test failed).
 */
import type { InboxRow, InboxStore, OutboxRow, Store } from '@queuebox/core';
import { StoreUnavailableError } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { assertSchemaName, requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll } from 'vitest';

export interface BrokerTestStore {
  readonly store: Store;
  readonly schema: string;
  readonly url: string;
  /** Every inbox row of a source, in id order. */
  inboxRows(source: string): Promise<InboxRow[]>;
  /** Every outbox row, in id order. */
  outboxRows(): Promise<OutboxRow[]>;
}

/** `undefined` with the reason printed when only PGlite is available (broker tests need a server). */
export async function postgresUrl(label: string): Promise<string | undefined> {
  const needs = await requireServices(label, ['postgres']);
  return needs.available ? needs.url.postgres : undefined;
}

/**
 * Call at the top level of a test file once `url` is known; with `undefined` (no PostgreSQL server) it registers
 * nothing and the file's tests are expected to be skipped.
 */
export function useBrokerTestStore(prefix: string, url: string | undefined): BrokerTestStore {
  if (url === undefined) {
    const absent = (): never => {
      throw new Error('no PostgreSQL server for this test file');
    };
    return {
      get store() {
        return absent();
      },
      schema: '',
      url: '',
      inboxRows: absent,
      outboxRows: absent,
    };
  }
  const { pool, schema } = usePostgresSchema(url, prefix, 2);
  const s = `"${assertSchemaName(schema.name)}"`;
  let store: Store | undefined;
  beforeAll(async () => {
    store = await openPostgresStore({ url, schema: schema.name, poolSize: 4 });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });
  const opened = () => {
    if (!store) throw new Error('the store opens in beforeAll');
    return store;
  };
  const rowsOf = async <T>(sql: string, values: unknown[], get: (id: string) => Promise<T | undefined>) => {
    const { rows } = await pool.query<{ row_id: string }>(sql, values);
    const found: T[] = [];
    for (const { row_id: id } of rows) {
      const row = await get(id);
      if (row) found.push(row);
    }
    return found;
  };
  return {
    get store() {
      return opened();
    },
    schema: schema.name,
    url,
    inboxRows: (source) =>
      rowsOf(`SELECT id::text AS row_id FROM ${s}.inbox WHERE source = $1 ORDER BY id`, [source], (id) =>
        opened().inbox.get(id),
      ),
    outboxRows: () =>
      rowsOf(`SELECT id::text AS row_id FROM ${s}.outbox ORDER BY id`, [], (id) => opened().outbox.get(id)),
  };
}

/** Polls `check` every 25 ms until it returns a value other than undefined, or throws after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A store whose database is a port nothing listens on: every statement throws StoreUnavailableError. */
export function deadStoreUrl(): string {
  return 'postgres://postgres@127.0.0.1:1/test';
}

/**
 * The real inbox store, unavailable while `state.down`: every call then rejects with core's StoreUnavailableError,
 * as the PostgreSQL store does when the database cannot be reached; `state.refused` counts those calls.
 */
export function outageableInbox(inbox: InboxStore): {
  readonly store: InboxStore;
  readonly state: { down: boolean; refused: number };
} {
  const state = { down: false, refused: 0 };
  const store = new Proxy(inbox, {
    get(target, name) {
      const value: unknown = Reflect.get(target, name, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (state.down) {
          state.refused += 1;
          return Promise.reject(new StoreUnavailableError('The database is unavailable (test outage)'));
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, state };
}
