/**
 * A pending row parked by plain SQL at 'infinity' (the README allows plain-SQL inserts) is never due. Before, the
 * admin store's nextDue answered it and threw reading it (`Expected a timestamp, got Infinity`), which failed every
 * outbox-tick after its drain, and any admin list page holding the row threw.
 */
import type { Store } from '@queuebox/core';
import { MessageState } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, requireServices } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openPostgresStore } from '../src/index.ts';

const needs = await requireServices('store-postgres: parked rows', ['postgres']);

describe.skipIf(needs.skipReason)('the next due row: parked rows, and clocks apart', () => {
  const url = needs.url.postgres;
  const schema = freshSchemaName('pg_parked');
  dropSchemasAfterPass(() => [schema], url);
  let store: Store;

  beforeAll(async () => {
    store = await openPostgresStore({ url, schema, poolSize: 2 });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });

  async function sql(text: string): Promise<void> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(text);
    } finally {
      await client.end();
    }
  }

  it('are never the next due, and are listed like other rows', async () => {
    // Prepare: one row parked at infinity
    await sql(
      `INSERT INTO "${schema}".outbox (topic, payload, max_attempts, scheduled_at) VALUES ('parked', '{}', 3, 'infinity')`,
    );

    // Act / Assess: alone, nothing is due later
    expect(await store.admin.nextDue('outbox')).toBeNull();
    await sql(
      `INSERT INTO "${schema}".outbox (topic, payload, max_attempts, scheduled_at) VALUES ('later', '{}', 3, now() + interval '1 hour')`,
    );
    const next = await store.admin.nextDue('outbox');
    const page = await store.admin.list('outbox', { state: MessageState.Pending, limit: 10 });

    expect(next?.getTime()).toBeGreaterThan(Date.now() + 3_500_000);
    expect(next?.getTime()).toBeLessThan(Date.now() + 3_700_000);
    expect(page.rows.map((r) => r.topic)).toEqual(['parked', 'later']);
    expect(page.rows[0]?.scheduledAt.getTime()).toBe(8.64e15);
    // nextDue is on this process's clock, the row's time on the database's: the same instant within the round trip.
    expect(Math.abs((page.rows[1]?.scheduledAt.getTime() ?? 0) - (next?.getTime() ?? 0))).toBeLessThan(1_000);
  });

  it("answers the next due time on this process's clock when it is minutes off the database's", async () => {
    // Prepare: this process's clock three minutes ahead of the database's; a row due in 90 s by the database
    await sql(`DELETE FROM "${schema}".outbox`);
    await sql(
      `INSERT INTO "${schema}".outbox (topic, payload, max_attempts, scheduled_at) VALUES ('soon', '{}', 3, now() + interval '90 seconds')`,
    );
    const real = Date.now.bind(Date);
    vi.spyOn(Date, 'now').mockImplementation(() => real() + 180_000);
    try {
      // Act
      const next = await store.admin.nextDue('outbox');

      // Assess: due 90 s from now on this clock (before: 90 s from the database's now, already past here)
      const inMs = (next?.getTime() ?? 0) - Date.now();
      expect(inMs).toBeGreaterThan(85_000);
      expect(inMs).toBeLessThan(95_000);
    } finally {
      vi.restoreAllMocks();
    }
  });
});
