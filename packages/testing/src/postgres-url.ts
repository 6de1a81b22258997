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
