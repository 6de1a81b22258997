/**
 * What the tests of this package share: the PostgreSQL they talk to, a fresh schema per file (dropped when the
 * file passed, kept and named when it failed), and small row factories.
 */
import { randomBytes } from 'node:crypto';
import type { NewInboxMessage, NewOutboxMessage } from '@queuebox/core';
import pg from 'pg';
import { afterAll, afterEach } from 'vitest';

/** The server of the integration tests: `QUEUEBOX_TEST_POSTGRES_URL`, else the local one. */
export const POSTGRES_URL =
  process.env.QUEUEBOX_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A unique schema name `t_pg_<prefix>_<random>`. */
export function freshSchema(prefix: string): string {
  return `t_pg_${prefix}_${randomBytes(4).toString('hex')}`;
}

/**
 * Registers, for the calling file, an `afterAll` that drops `schemas` on the server when every test passed and
 * prints them when one failed, so the rows of the failure can be inspected.
 */
export function dropSchemasAfterPass(schemas: () => readonly string[]): void {
  let failed = false;
  afterEach((context) => {
    if (context.task.result?.state === 'fail') failed = true;
  });
  afterAll(async () => {
    const names = schemas();
    if (failed) {
      console.info(
        `[store-postgres tests] keeping schemas ${names.join(', ')} for inspection: a test failed`,
      );
      return;
    }
    const client = new pg.Client(POSTGRES_URL);
    await client.connect();
    try {
      for (const name of names) await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    } finally {
      await client.end();
    }
  });
}

/** A new pg pool on the test server. */
export function testPool(max = 4): pg.Pool {
  return new pg.Pool({ connectionString: POSTGRES_URL, max });
}

/** An outbox message with defaults: topic `t`, no key, payload `{ n: 0 }`, 3 attempts. */
export function anOutboxMessage(overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage {
  return { topic: 't', key: null, payload: { n: 0 }, maxAttempts: 3, ...overrides };
}

/** An inbox message with defaults: source `s`, a random idempotency key, payload `{ n: 0 }`, 3 attempts. */
export function anInboxMessage(overrides: Partial<NewInboxMessage> = {}): NewInboxMessage {
  return {
    source: 's',
    idempotencyKey: randomBytes(6).toString('hex'),
    payload: { n: 0 },
    maxAttempts: 3,
    ...overrides,
  };
}
