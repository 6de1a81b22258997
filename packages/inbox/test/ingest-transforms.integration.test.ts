/** Ingestion on a real PostgreSQL store: transforms, load and outage, and configuration checks. */
import { randomUUID } from 'node:crypto';
import { errorFields, StoreUnavailableError } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createIngestion } from '../src/index.ts';
import {
  anEvent,
  anOrdersRequest,
  aStripeRequest,
  clock,
  ingestionFor,
  sources,
  transforms,
} from './ingest-fixtures.ts';

const db = useTestStore('inbox_ingest_transforms', { storePoolSize: 10 });
const ingestion = ingestionFor(db);

describe('ingestion transforms', () => {
  it('422: a rejected message stores nothing, so the same key is accepted later', async () => {
    // Prepare
    const key = randomUUID();
    // Act
    const rejected = await ingestion().handle(anOrdersRequest({ kind: 'test', total: 1 }, key));
    const thrown = await ingestion().handle(anOrdersRequest({ kind: 'sale', total: -1 }, key));
    // Assess
    expect(rejected.status).toBe(422);
    expect(rejected.body).toEqual({
      error: 'transform_rejected',
      message: 'The transform rejected the message: test orders are not stored',
    });
    expect(thrown.status).toBe(422);
    expect(await db.countInbox('orders', key)).toBe(0);
    const accepted = await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 3 }, key));
    expect(accepted.status).toBe(202);
  });

  it('stores the transformed payload and headers; a pull source does not wake the relay', async () => {
    const key = randomUUID();
    const answer = await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 5 }, key));
    expect(answer.stored).toEqual({ id: answer.body.id, source: 'orders', mode: 'pull', wakeRelay: false });
    const row = await db.store.inbox.get(answer.body.id as string);
    expect(row).toMatchObject({
      payload: { kind: 'sale', totalCents: 500 },
      eventType: 'sale',
      maxAttempts: 4,
    });
    expect(row?.headers).toEqual({
      'idempotency-key': key,
      'x-transformed': 'yes',
    });
  });

  it('runs the transform before the duplicate check: a repeat that is now rejected answers 422', async () => {
    const key = randomUUID();
    expect((await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 1 }, key))).status).toBe(202);
    expect((await ingestion().handle(anOrdersRequest({ kind: 'test', total: 1 }, key))).status).toBe(422);
    expect((await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 1 }, key))).status).toBe(200);
  });

  it('JSONata: stores the expression result, and $reject answers 422 without storing', async () => {
    const post = (kind: string, key: string) =>
      ingestion().handle({
        method: 'POST',
        path: '/inbox/mapped',
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
        body: new TextEncoder().encode(JSON.stringify({ kind, extra: true })),
      });
    const key = randomUUID();
    const rejected = await post('test', key);
    expect(rejected.status).toBe(422);
    expect(rejected.body.message).toBe('The transform rejected the message: test event');
    expect(await db.countInbox('mapped', key)).toBe(0);
    const accepted = await post('sale', key);
    expect(accepted.status).toBe(202);
    expect((await db.store.inbox.get(accepted.body.id as string))?.payload).toEqual({
      kind: 'sale',
      from: 'mapped',
    });
  });

  it('422: a transform result the database could not store (a decoded %00) stores nothing, instead of failing on every retry', async () => {
    const key = randomUUID();
    const answer = await ingestion().handle({
      method: 'POST',
      path: '/inbox/decoding',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      body: new TextEncoder().encode(JSON.stringify({ ref: '%00' })),
    });

    expect(answer.status).toBe(422);
    expect(answer.body.message).toBe(
      "The transform rejected the message: the transform's result cannot be stored: its payload holds a U+0000 character, which the database cannot store",
    );
    expect(await db.countInbox('decoding', key)).toBe(0);
  });

  it('500: a transform that throws an unexpected error answers a generic body and hands the error over', async () => {
    const answer = await ingestion().handle({
      method: 'POST',
      path: '/inbox/buggy',
      headers: { 'idempotency-key': randomUUID(), 'content-type': 'application/json' },
      body: new TextEncoder().encode('{}'),
    });
    expect(answer.status).toBe(500);
    expect(answer.body).toEqual({ error: 'internal_error', message: 'Internal error' });
    expect(JSON.stringify(answer.body)).not.toContain('hunter2');
    expect((answer.error as Error).message).toContain('hunter2');
  });
});

describe('ingestion under load and outage', () => {
  it('50 concurrent identical posts: one 202, 49 duplicates, one row', async () => {
    // Prepare
    const event = anEvent();
    const service = ingestion();
    // Act
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => service.handle(aStripeRequest(event))),
    );
    // Assess
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(49);
    expect(answers.filter((a) => a.status === 200).every((a) => a.body.status === 'duplicate')).toBe(true);
    expect(await db.countInbox('stripe', event.id)).toBe(1);
  });

  it('503: answers store_unavailable when the database cannot be reached', async () => {
    // A real store pointed at a port where nothing listens.
    const down = await openPostgresStore({ url: 'postgres://postgres@127.0.0.1:1/test', schema: db.schema });
    try {
      const service = createIngestion({ store: down.inbox, sources, transforms, clock });
      const answer = await service.handle(aStripeRequest(anEvent()));
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual({ error: 'store_unavailable', message: expect.any(String) });
      // The cause, for the caller's log line (never sent): without it functions logged `"message":"undefined"`.
      expect(answer.error).toBeInstanceOf(StoreUnavailableError);
      expect(errorFields(answer.error).message).toMatch(/^The database is unavailable: /);
    } finally {
      await down.close();
    }
  });
});

describe('ingestion configuration', () => {
  it('refuses unknown schemes, bad paths, missing functions and clashing paths, listing every problem', () => {
    let issues: readonly { path: string }[] = [];
    try {
      createIngestion({
        store: db.store.inbox,
        sources: {
          a: { type: 'http', auth: { scheme: 'nope' as never, secrets: ['x'] } },
          b: { type: 'http', eventTypePath: 'type' },
          c: { type: 'http', transform: { function: 'missing' } },
          d: { type: 'http', path: '/a/' },
          e: { type: 'http', auth: { scheme: 'hmac', secrets: ['x'] } },
        },
      });
    } catch (error) {
      issues = (error as { issues: { path: string }[] }).issues;
    }
    expect(issues.map((i) => i.path).sort()).toEqual([
      'sources.a.auth.scheme',
      'sources.b',
      'sources.c.transform',
      'sources.d.path',
      'sources.e.auth',
    ]);
  });
});
