import { requireServices } from '@queuebox/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../src/index.ts';
import { useMigratedSchema } from './support/migrated-schema.ts';

const needs = await requireServices('store-postgres: application_name', ['postgres']);

describe.skipIf(needs.skipReason)('the application_name of the store pool', () => {
  const url = needs.url.postgres;
  const { schema, opened } = useMigratedSchema(url, 'pg_application_name');

  /** The url with `?name=value` added (or replaced). */
  const withParam = (name: string, value: string) => {
    const parsed = new URL(url);
    parsed.searchParams.set(name, value);
    return parsed.toString();
  };

  /**
   * The application_name of the backends whose last statement read this file's schema, other than the asking one:
   * the one connection of a store of pool size 1 that just read a row.
   */
  async function applicationNamesOf(storeUrl: string): Promise<string[]> {
    const store = await openPostgresStore({ url: storeUrl, schema, poolSize: 1 });
    opened.push(store);
    await store.outbox.get('1');
    const observer = new pg.Client({ connectionString: url });
    await observer.connect();
    try {
      const { rows } = await observer.query<{ application_name: string }>(
        `SELECT application_name FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND query LIKE '%' || $1::text || '%'`,
        [schema],
      );
      return rows.map((row) => row.application_name);
    } finally {
      await observer.end();
    }
  }

  it('is queuebox when the url names none', async () => {
    expect(await applicationNamesOf(url)).toEqual(['queuebox']);
  });

  it("is the url's own when it names one (?application_name=mine)", async () => {
    expect(await applicationNamesOf(withParam('application_name', 'mine'))).toEqual(['mine']);
  });

  it("is PGAPPNAME's when the environment names one", async () => {
    const before = process.env.PGAPPNAME;
    process.env.PGAPPNAME = 'from-env';
    try {
      expect(await applicationNamesOf(url)).toEqual(['from-env']);
    } finally {
      if (before === undefined) delete process.env.PGAPPNAME;
      else process.env.PGAPPNAME = before;
    }
  });
});
