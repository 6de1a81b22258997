/** Ingestion on a real PostgreSQL store: transforms, load and outage, and configuration checks. */
import { randomUUID } from 'node:crypto';
import { errorFields, StoreUnavailableError } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createIngestion, type Ingestion, type TransformResult } from '../src/index.ts';
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

describe('ingestion transform limits: time, size and what JSON cannot hold (hostile-input audit)', () => {
  const limited = () =>
    createIngestion({
      store: db.store.inbox,
      sources: {
        endless: {
          type: 'http',
          transformTimeoutMs: 200,
          transform: { jsonata: '($f := function($n){ $f($n + 1) }; $f(0))' },
        },
        quadratic: {
          type: 'http',
          transform: {
            jsonata: '{"lines": $map(lines, function($l){ {"same": $count(lines[sku = $l.sku])} })}',
          },
        },
        growing: {
          type: 'http',
          transform: { jsonata: '{"s": $join($map([1..n], function($i){ "xxxxxxxxxx" }))}' },
        },
        coded: { type: 'http', transform: { function: 'coded' } },
        hanging: { type: 'http', transform: { function: 'hanging' } },
      },
      inbox: { basePath: '/inbox', maxBodyBytes: 65_536, transformTimeoutMs: 300 },
      transforms: {
        coded: ({ payload }) => {
          const kind = (payload as { kind: string }).kind;
          const results: Record<string, unknown> = {
            undefined: undefined,
            null: null,
            text: 'x',
            empty: {},
            symbol: { payload: Symbol('x') },
            function: { payload: () => 1 },
            bigint: { payload: { n: 10n } },
            nan: { payload: { n: Number.NaN } },
            date: { payload: { d: new Date(0) } },
            map: { payload: { m: new Map([[1, 2]]) } },
          };
          return results[kind] as TransformResult;
        },
        hanging: () => new Promise<TransformResult>(() => {}),
      },
    });
  const post = (service: Ingestion, path: string, body: unknown, key = randomUUID()) =>
    service.handle({
      method: 'POST',
      path: `/inbox/${path}`,
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      body: new TextEncoder().encode(JSON.stringify(body)),
    });

  it('503 transform_timeout: a transform still running at its time limit is answered retry-later, and nothing is stored', async () => {
    // Prepare
    const service = limited();
    const key = randomUUID();
    const lines = Array.from({ length: 1500 }, (_, i) => ({ sku: `s${i % 50}` }));
    // Act
    const started = Date.now();
    const endless = await post(service, 'endless', {}, key);
    const quadratic = await post(service, 'quadratic', { lines }, key);
    const hanging = await post(service, 'hanging', {}, key);
    // Assess: not final (a 422 would be): the limit is wall-clock time, which load can use up (see transform.ts).
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(endless.status).toBe(503);
    expect(endless.body).toEqual({
      error: 'transform_timeout',
      message: 'The transform ran out of time (200 ms); retry later',
    });
    expect(quadratic.body.message).toBe('The transform ran out of time (300 ms); retry later');
    expect(hanging).toMatchObject({ status: 503, outcome: 'transform_timeout' });
    for (const source of ['endless', 'quadratic', 'hanging']) {
      expect(await db.countInbox(source, key)).toBe(0);
    }
  });

  it('422: a result larger than inbox.maxBodyBytes as JSON is rejected, not stored from a 60-byte request', async () => {
    const key = randomUUID();
    const small = await post(limited(), 'growing', { n: 100 });
    const grown = await post(limited(), 'growing', { n: 10_000 }, key);

    expect(small.status).toBe(202);
    expect(grown.status).toBe(422);
    expect(grown.body.message).toBe(
      "The transform rejected the message: the transform's result is too large: its payload takes more than the 65536 bytes a source accepts (inbox.maxBodyBytes, or the size of the message received when larger)",
    );
    expect(await db.countInbox('growing', key)).toBe(0);
  });

  it('422, never 500: a function answering no usable JSON payload is rejected, naming the problem', async () => {
    // Prepare
    const service = limited();
    const kinds = [
      'undefined',
      'null',
      'text',
      'empty',
      'symbol',
      'function',
      'bigint',
      'nan',
      'date',
      'map',
    ];
    // Act
    const answers: Record<string, string> = {};
    for (const kind of kinds) {
      const answer = await post(service, 'coded', { kind });
      answers[kind] = `${answer.status} ${String(answer.body.message)}`;
    }
    // Assess
    const prefix = "422 The transform rejected the message: the transform's result cannot be stored: ";
    expect(answers).toEqual({
      undefined: `${prefix}it is not a { payload } object (undefined)`,
      null: `${prefix}it is not a { payload } object (null)`,
      text: `${prefix}it is not a { payload } object (string)`,
      empty: `${prefix}it has no payload`,
      symbol: `${prefix}its payload holds a symbol, which JSON cannot hold`,
      function: `${prefix}its payload holds a function, which JSON cannot hold`,
      bigint: `${prefix}its payload holds a BigInt, which JSON cannot hold`,
      nan: `${prefix}its payload holds NaN, which JSON cannot hold`,
      date: `${prefix}its payload holds an object of type Date, which JSON cannot hold exactly (plain objects and arrays only)`,
      map: `${prefix}its payload holds an object of type Map, which JSON cannot hold exactly (plain objects and arrays only)`,
    });
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
