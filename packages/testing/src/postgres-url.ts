/** The one place the tests' PostgreSQL address is written down. */

/** The machine's server of the integration tests (trust authentication, database `test`). */
export const LOCAL_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

/**
 * The PostgreSQL of the integration tests that need no probe: `QUEUEBOX_TEST_POSTGRES_URL`, else
 * `postgres://postgres@127.0.0.1:5432/test`. `findPostgres()` reads the same variable first.
 */
export function testPostgresUrl(): string {
  return process.env.QUEUEBOX_TEST_POSTGRES_URL || LOCAL_POSTGRES_URL;
}

/**
 * The database of the tests that check query plans: the test server's, with `_plans` appended to the database name
 * (`…/test_plans`). A plan that reads an index only is chosen when VACUUM has marked the table's pages all-visible,
 * and VACUUM marks none while a transaction older than the rows runs in the same database — another test file's, in
 * parallel. PostgreSQL keeps that horizon per database, so the plan tests' tables, in a database of their own, are
 * vacuumed whatever the rest of the suite holds open. See `ensurePlanTestDatabase`.
 */
export function planTestPostgresUrl(): string {
  const url = new URL(testPostgresUrl());
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || 'postgres';
  url.pathname = `/${encodeURIComponent(`${database}_plans`)}`;
  return url.toString();
}
