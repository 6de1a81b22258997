/**
 * The ingestion's answers when the store cannot keep up (overload audit): every 503 `store_unavailable` carries
 * `Retry-After`, and with inserts blocked by a lock on the inbox table (held from a second connection) the senders
 * are answered within the store's deadline (`inboxMaxWaitMs`) instead of after 44 to 60 s.
 */
import { StoreUnavailableError } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, freshSchemaName, requireServices } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIngestion, type IngestResponse, RETRY_AFTER_SECONDS } from '../src/index.ts';
import { anEvent, aStripeRequest, clock, sources, transforms } from './ingest-fixtures.ts';

const needs = await requireServices('inbox: ingestion under overload', ['postgres']);

const TIMED_OUT = Symbol('timed out');

function within<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

describe.skipIf(needs.skipReason)('ingestion when the store cannot keep up', () => {
  const url = needs.url.postgres;
  const schema = freshSchemaName('ingest_overload');
  // Dropped after a passing file, kept for inspection after a failing one.
  dropSchemasAfterPass(() => [schema], url);
  const admin = new pg.Client(url);

  beforeAll(async () => {
    await admin.connect();
    const store = await openPostgresStore({ url, schema });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
  });
  afterAll(async () => {
    await admin.end();
  });

  it('answers 503 store_unavailable with Retry-After when the database cannot be reached', async () => {
    const down = await openPostgresStore({ url: 'postgres://postgres@127.0.0.1:1/test', schema });
    try {
      const service = createIngestion({ store: down.inbox, sources, transforms, clock });
      const answer = await service.handle(aStripeRequest(anEvent()));
      expect(answer).toMatchObject({ status: 503, outcome: 'store_unavailable' });
      expect(answer.headers['retry-after']).toBe(String(RETRY_AFTER_SECONDS));
      expect(answer.headers['content-type']).toBe('application/json');
    } finally {
      await down.close();
    }
  });

  it('answers senders 503 with Retry-After within inboxMaxWaitMs while inserts are blocked', async () => {
    // Prepare
    const maxWaitMs = 1000;
    const store = await openPostgresStore({ url, schema, poolSize: 4, inboxMaxWaitMs: maxWaitMs });
    const locker = new pg.Client(url);
    await locker.connect();
    try {
      await store.ping();
      const service = createIngestion({ store: store.inbox, sources, transforms, clock });
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE "${schema}".inbox IN SHARE MODE`);
      const events = Array.from({ length: 250 }, () => anEvent());

      // Act
      const started = performance.now();
      const answers = await within(
        Promise.all(events.map((event) => service.handle(aStripeRequest(event)))),
        maxWaitMs + 5000,
      );
      const ms = performance.now() - started;

      // Assess: before, the senders waited for the statement timeout (30 s), the queued ones for one more.
      expect(answers).not.toBe(TIMED_OUT);
      expect(ms).toBeLessThan(maxWaitMs + 5000);
      for (const answer of answers as IngestResponse[]) {
        expect(answer).toMatchObject({ status: 503, outcome: 'store_unavailable' });
        expect(answer.body).toEqual({ error: 'store_unavailable', message: expect.any(String) });
        expect(answer.headers['retry-after']).toBe(String(RETRY_AFTER_SECONDS));
        expect(answer.error).toBeInstanceOf(StoreUnavailableError);
      }
      expect(service.pendingStores).toBe(0);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
      await store.close();
    }
  }, 60_000);
});
