/**
 * The relay's claim (`claimForRelay`, the claim of `forwardAndClaim`) answers no payload — the forward copies it
 * inside the database — so a large payload must neither flag its row `outside` nor be read in chunks afterwards.
 * Large headers and last_error of a relay row are still read outside, whole. Counted in Data API calls on the local
 * endpoint (real SDK, real PostgreSQL), and in statements on PostgreSQL and PGlite behind an executor with the Data
 * API's result limits.
 */
import { PGlite } from '@electric-sql/pglite';
import type { InboxStore, RelayInboxRow } from '@queuebox/core';
import {
  createPgExecutor,
  createPgliteExecutor,
  createPostgresInboxStore,
  PGLITE_PARSERS,
  runMigrations,
  type SqlExecutor,
} from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useDataApiStore } from './data-api-store.ts';

const needs = await requireServices('data api relay payload', ['postgres']);

const SOURCE = 'relay-src';
const LIMITS = { maxRowBytes: 64 * 1024, maxResultBytes: 1024 * 1024 };

/** Inserts `n` pending rows of `SOURCE` with a payload of about `payloadChars` characters. */
function insertRows(
  schema: string,
  n: number,
  payloadChars: number,
  extra: { headersChars?: number; lastErrorChars?: number; first?: number } = {},
): string {
  const headers =
    extra.headersChars === undefined
      ? `'{"h":"v"}'::jsonb`
      : `jsonb_build_object('big', repeat('y', ${extra.headersChars}))`;
  const lastError = extra.lastErrorChars === undefined ? 'NULL' : `repeat('e', ${extra.lastErrorChars})`;
  const first = extra.first ?? 1;
  return `INSERT INTO "${schema}".inbox (source, idempotency_key, payload, headers, max_attempts, last_error)
SELECT '${SOURCE}', 'k-' || g, jsonb_build_object('n', g, 'blob', repeat('x', ${payloadChars})), ${headers}, 5, ${lastError}
FROM generate_series(${first}, ${first + n - 1}) g`;
}

function expectNoPayload(rows: readonly RelayInboxRow[]): void {
  for (const row of rows) expect(row.payload).toBeUndefined();
}

describe.skipIf(needs.skipReason)('relay claim on the Data API: payloads are neither sized nor read', () => {
  const fixture = useDataApiStore(needs.url.postgres, 'dapi_relay');
  const { pool, schema } = fixture;
  beforeEach(async () => {
    await pool.query(`DELETE FROM "${schema.name}".inbox`);
    await pool.query(`DELETE FROM "${schema.name}".outbox`);
  });

  it('claims 100 rows of 50 KB payloads in one call', async () => {
    await pool.query(insertRows(schema.name, 100, 50_000));
    fixture.endpoint.resetCalls();
    const started = Date.now();

    const rows = await fixture.store.inbox.claimForRelay({
      sources: [SOURCE],
      batchSize: 100,
      leaseMs: 60_000,
    });

    console.info(
      `[relay payload] claimForRelay of 100 rows of 50 KB: ${fixture.endpoint.calls.Execute} calls, ${Date.now() - started} ms`,
    );
    expect(rows).toHaveLength(100);
    expectNoPayload(rows);
    for (const row of rows) expect(row.headers).toEqual({ h: 'v' });
    expect(fixture.endpoint.calls.Execute).toBe(1);
  });

  it('forwards 50 rows and claims the next 50 in one call, the payloads copied whole', async () => {
    await pool.query(insertRows(schema.name, 100, 50_000));
    const first = await fixture.store.inbox.claimForRelay({
      sources: [SOURCE],
      batchSize: 50,
      leaseMs: 60_000,
    });
    expect(first).toHaveLength(50);
    fixture.endpoint.resetCalls();

    const { forwarded, claimed } = await fixture.store.inbox.forwardAndClaim(
      first.map((r) => ({
        id: r.id,
        claimToken: r.claimToken as string,
        outbox: { topic: 'forwarded', maxAttempts: 5 },
      })),
      { sources: [SOURCE], batchSize: 50, leaseMs: 60_000 },
    );

    expect(forwarded.settled).toHaveLength(50);
    expect(claimed).toHaveLength(50);
    expectNoPayload(claimed);
    expect(fixture.endpoint.calls.Execute).toBe(1);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema.name}".outbox WHERE octet_length(payload::text) > 50000`,
    );
    expect(rows[0]?.n).toBe(50);
  });

  it('reads large headers and last_error of relay rows outside, without their payload', async () => {
    // 600 KB payloads: 40 chunks each, that an outside read of the payload would need 10 pages for.
    await pool.query(insertRows(schema.name, 3, 600_000, { headersChars: 100_000, lastErrorChars: 40_000 }));
    fixture.endpoint.resetCalls();

    const rows = await fixture.store.inbox.claimForRelay({
      sources: [SOURCE],
      batchSize: 10,
      leaseMs: 60_000,
    });

    expect(rows).toHaveLength(3);
    expectNoPayload(rows);
    for (const row of rows) {
      expect(row.headers).toEqual({ big: 'y'.repeat(100_000) });
      expect(row.lastError).toBe('e'.repeat(40_000));
    }
    // The claim, then the headers (7 chunks each) and last_error (3 each): 30 chunks, 3 pages of 13.
    expect(fixture.endpoint.calls.Execute).toBeLessThanOrEqual(4);
  });

  it('still answers the payloads of a pull claim, read outside', async () => {
    await pool.query(insertRows(schema.name, 3, 100_000));

    const rows = await fixture.store.inbox.claim({ sources: [SOURCE], batchSize: 10, leaseMs: 60_000 });

    expect(rows).toHaveLength(3);
    for (const row of rows) expect((row.payload as { blob: string }).blob).toBe('x'.repeat(100_000));
  });
});

/** `inner` with the Data API's result limits, counting its statements (transactions are not used here). */
function limited(inner: SqlExecutor): SqlExecutor & { count: number } {
  const executor = {
    count: 0,
    resultLimits: LIMITS,
    query: ((text, values, options) => {
      executor.count++;
      return inner.query(text, values, options);
    }) as SqlExecutor['query'],
    transaction: ((fn) => inner.transaction(fn)) as SqlExecutor['transaction'],
    close: () => inner.close(),
  };
  return executor;
}

describe.skipIf(needs.skipReason)('relay claim with result limits on PostgreSQL and PGlite', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'dapi_relay_pg', 2);
  let pglite: PGlite;

  beforeAll(async () => {
    pglite = await PGlite.create({ parsers: PGLITE_PARSERS });
  });
  afterAll(async () => {
    await pglite?.close();
  });

  const cases: [string, () => Promise<{ executor: SqlExecutor; schema: string }>][] = [
    ['PostgreSQL', async () => ({ executor: createPgExecutor(pool), schema: schema.name })],
    ['PGlite', async () => ({ executor: createPgliteExecutor(pglite), schema: 'dapi_relay' })],
  ];

  for (const [name, open] of cases) {
    it(`${name}: 100 rows of 50 KB payloads in one statement, large headers read outside`, async () => {
      const { executor: inner, schema: target } = await open();
      await runMigrations(inner, { schema: target });
      await inner.query(insertRows(target, 100, 50_000));
      await inner.query(insertRows(target, 1, 200_000, { headersChars: 100_000, first: 101 }));
      const executor = limited(inner);
      const inbox: InboxStore = createPostgresInboxStore({ executor, schema: target });

      const rows = await inbox.claimForRelay({ sources: [SOURCE], batchSize: 100, leaseMs: 60_000 });
      expect(rows).toHaveLength(100);
      expectNoPayload(rows);
      expect(executor.count).toBe(1);

      const big = await inbox.claimForRelay({ sources: [SOURCE], batchSize: 100, leaseMs: 60_000 });
      expect(big).toHaveLength(1);
      expectNoPayload(big);
      expect(big[0]?.headers).toEqual({ big: 'y'.repeat(100_000) });
      // The claim and one page of 7 header chunks and a last_error one (a payload read would add 14 chunks).
      expect(executor.count).toBe(3);
    });
  }
});
