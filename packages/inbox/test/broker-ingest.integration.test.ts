import { createHash, randomUUID } from 'node:crypto';
import type { BrokerMessage, InboxRow, Store } from '@queuebox/core';
import { MessageState, StoreUnavailableError } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropPostgresSchemaStatement, requireServices, useSchema } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sources, TransformFunctions, TransformResult } from '../src/index.ts';
import {
  createBrokerIngestion,
  fallbackIdempotencyKey,
  reject,
  TransformRejectedError,
  UnknownBrokerSourceError,
  undecodableBodyPayload,
} from '../src/index.ts';

const needs = await requireServices('broker ingest', ['postgres']);

const schema = useSchema('broker_ingest', {
  async drop(name) {
    if (!needs.available) return;
    const client = new pg.Client({ connectionString: needs.url.postgres });
    await client.connect();
    try {
      await client.query(dropPostgresSchemaStatement(name).text);
    } finally {
      await client.end();
    }
  },
});

let store: Store;
beforeAll(async () => {
  if (!needs.available) return;
  store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name, poolSize: 2 });
  await store.migrate();
});
afterAll(async () => {
  await store?.close();
});

const sources: Sources = {
  orders: {
    type: 'amqp',
    idempotencyKey: { path: '$.id' },
    eventTypeFromHeader: true,
    aggregateIdPath: '$.order',
    transform: { function: 'orders' },
    maxAttempts: 3,
  },
  plain: { type: 'kafka', mode: 'pull' },
  headerKeyed: { type: 'nats', idempotencyKey: { header: 'Msg-Key' }, eventTypePath: '$.kind' },
  mapped: { type: 'amqp', transform: { jsonata: 'kind = "test" ? $reject("test event") : {"k": kind}' } },
  decoding: { type: 'kafka', transform: { jsonata: '$merge([$, {"ref": $decodeUrlComponent(ref)}])' } },
  web: { type: 'http' },
};

const transforms: TransformFunctions = {
  orders: ({ payload }) => {
    const order = payload as { total?: number };
    if (order.total === undefined) reject('no total');
    if (order.total < 0) throw new TransformRejectedError('negative total');
    return { payload: { ...(payload as object), cents: order.total * 100 }, headers: { 'X-Checked': 'yes' } };
  },
};

function aMessage(overrides: Partial<BrokerMessage> & { json?: unknown } = {}): BrokerMessage {
  const { json, ...rest } = overrides;
  return {
    body: new TextEncoder().encode(JSON.stringify(json ?? { id: randomUUID(), order: 'o-1', total: 5 })),
    headers: {},
    ...rest,
  };
}

function ingestion() {
  return createBrokerIngestion({
    store: store.inbox,
    sources,
    inbox: { relay: { enabled: true } },
    outbox: { maxAttempts: 9 },
    transforms,
  });
}

async function row(id: string): Promise<InboxRow> {
  const found = await store.inbox.get(id);
  if (!found) throw new Error(`no inbox row ${id}`);
  return found;
}

describe('fallback keys and undecodable bodies (pure)', () => {
  it('prefers the message id, then the default key, then a fresh random key', () => {
    // Prepare
    const body = new TextEncoder().encode('{"a":1}');
    // Act
    const keys = [
      fallbackIdempotencyKey({ body, headers: {}, messageId: 'm-1', defaultIdempotencyKey: 't:0:1' }),
      fallbackIdempotencyKey({ body, headers: {}, defaultIdempotencyKey: 't:0:1' }),
      fallbackIdempotencyKey({ body, headers: {} }),
      fallbackIdempotencyKey({ body, headers: {}, messageId: 'x'.repeat(601) }),
      fallbackIdempotencyKey({ body, headers: {} }),
    ];
    // Assess
    expect(keys[0]).toBe('m-1');
    expect(keys[1]).toBe('t:0:1');
    expect(keys[2]).toMatch(/^random:[0-9a-f-]{36}$/);
    expect(keys[4]).toMatch(/^random:[0-9a-f-]{36}$/);
    expect(keys[4]).not.toBe(keys[2]);
    expect(keys[3]).toBe(`sha256:${createHash('sha256').update('x'.repeat(601)).digest('hex')}`);
  });

  it('keeps text as a JSON string and anything else as base64', () => {
    // Prepare
    const bytes = new Uint8Array([0xff, 0x00, 0x41]);
    // Act
    const text = undecodableBodyPayload(new TextEncoder().encode('<xml/>'), '<xml/>');
    const binary = undecodableBodyPayload(bytes, null);
    const withNul = undecodableBodyPayload(new Uint8Array([0x61, 0x00]), 'a\u0000');
    // Assess
    expect(text).toBe('<xml/>');
    expect(binary).toEqual({ base64: Buffer.from(bytes).toString('base64') });
    expect(withNul).toEqual({ base64: 'YQA=' });
  });
});

describe.runIf(needs.available)(`broker ingestion on ${needs.via.postgres}`, () => {
  it('stores a message with the configured key, the AMQP type property and the transform applied', async () => {
    // Prepare
    const id = randomUUID();
    const message = aMessage({
      json: { id, order: 'o-7', total: 2 },
      headers: { 'X-Correlation-Id': 'corr-1', Authorization: 'secret', 'X-Trace': 't' },
      type: 'order.created',
      messageId: 'ignored-because-a-path-is-configured',
    });
    // Act
    const result = await ingestion().ingest('orders', message);
    // Assess
    expect(result).toMatchObject({ status: 'stored', wakeRelay: true });
    const stored = await row(result.id);
    expect(stored).toMatchObject({
      source: 'orders',
      idempotencyKey: id,
      eventType: 'order.created',
      aggregateId: 'o-7',
      correlationId: 'corr-1',
      state: MessageState.Pending,
      maxAttempts: 3,
      payload: { id, order: 'o-7', total: 2, cents: 200 },
      headers: { 'x-correlation-id': 'corr-1', 'x-trace': 't', 'x-checked': 'yes' },
    });
    expect(stored.headers).not.toHaveProperty('authorization');
  });

  it('keeps the case of header names a source wrote as base64 (their bytes were not UTF-8): two such names stay two', async () => {
    // Prepare: the names of the bytes 78 FF and 7A 9F, as the AMQP, Kafka and NATS sources write them; lower-cased
    // they were one name and one value was lost (outside encodings audit).
    const message = aMessage({
      json: { id: randomUUID(), order: 'o-9', total: 1 },
      headers: { 'base64:eP8=': 'first', 'base64:ep8=': 'second', 'X-Plain': 'p' },
    });
    // Act
    const result = await ingestion().ingest('orders', message);
    // Assess
    expect((await row(result.id)).headers).toMatchObject({
      'base64:eP8=': 'first',
      'base64:ep8=': 'second',
      'x-plain': 'p',
    });
  });

  it('answers duplicate for the same message delivered twice and keeps one row', async () => {
    // Prepare
    const message = aMessage({ json: { id: randomUUID(), order: 'o-2', total: 1 } });
    const first = await ingestion().ingest('orders', message);
    // Act
    const second = await ingestion().ingest('orders', message);
    // Assess
    expect(first.status).toBe('stored');
    expect(second).toEqual({ status: 'duplicate', id: first.id, wakeRelay: false });
  });

  it('falls back to the message id, then the default key, then a fresh key: two id-less publishes of the same bytes are two rows', async () => {
    // Prepare
    const messageId = randomUUID();
    const offset = `topic-${randomUUID()}:0:42`;
    const body = { note: randomUUID() };
    // Act
    const byId = await ingestion().ingest('plain', aMessage({ json: { n: 1 }, messageId }));
    const byDefault = await ingestion().ingest(
      'plain',
      aMessage({ json: { n: 2 }, defaultIdempotencyKey: offset }),
    );
    const idless = await ingestion().ingest('plain', aMessage({ json: body }));
    const again = await ingestion().ingest('plain', aMessage({ json: body }));
    // Assess
    expect((await row(byId.id)).idempotencyKey).toBe(messageId);
    expect((await row(byDefault.id)).idempotencyKey).toBe(offset);
    expect([idless.status, again.status]).toEqual(['stored', 'stored']);
    expect(again.id).not.toBe(idless.id);
    expect((await row(idless.id)).idempotencyKey).toMatch(/^random:/);
    expect(byId.wakeRelay).toBe(false); // a pull source
  });

  it('reads a header key and a path event type, and the transport correlation id when no header has one', async () => {
    // Prepare
    const key = randomUUID();
    // Act
    const result = await ingestion().ingest(
      'headerKeyed',
      aMessage({ json: { kind: 'k.1' }, headers: { 'msg-key': key }, correlationId: 'from-property' }),
    );
    // Assess
    expect(await row(result.id)).toMatchObject({
      idempotencyKey: key,
      eventType: 'k.1',
      correlationId: 'from-property',
    });
  });

  it('stores a body with a number beyond what jsonb holds as a dead row with its text, never failing the insert', async () => {
    const text = `{"n": 1e1000000, "k": "${randomUUID()}"}`;
    const result = await ingestion().ingest('plain', { body: new TextEncoder().encode(text), headers: {} });
    expect(result).toMatchObject({ status: 'dead' });
    expect(await row(result.id)).toMatchObject({ state: MessageState.Dead, payload: text });
    expect((await row(result.id)).lastError).toContain('beyond the range the database stores');
  });

  it('stores a body with a number PostgreSQL refuses as written (1.0e-16383: scale 16384) as a dead row, never failing the insert', async () => {
    // Before, the scale of the text was not checked: the insert failed on every redelivery, a poison message that
    // held its queue or partition for ever.
    const text = `{"n": 1.0e-16383, "k": "${randomUUID()}"}`;
    const result = await ingestion().ingest('plain', { body: new TextEncoder().encode(text), headers: {} });
    expect(result).toMatchObject({ status: 'dead' });
    expect(await row(result.id)).toMatchObject({ state: MessageState.Dead, payload: text });
    expect((await row(result.id)).lastError).toContain('more than 16383 digits after the decimal point');
  });

  it('stores a body that is not JSON as a dead row, as text or base64', async () => {
    // Prepare
    const text = `not json ${randomUUID()}`;
    const binary = new Uint8Array([0xc3, 0x28, 0x00, 0x01]);
    // Act
    const asText = await ingestion().ingest('orders', {
      body: new TextEncoder().encode(text),
      headers: {},
      type: 'order.weird',
    });
    const asBinary = await ingestion().ingest('plain', {
      body: binary,
      headers: {},
      defaultIdempotencyKey: randomUUID(),
    });
    const again = await ingestion().ingest('orders', { body: new TextEncoder().encode(text), headers: {} });
    // Assess
    expect(asText).toMatchObject({ status: 'dead', reason: 'The body is not JSON (stored as text)' });
    expect(await row(asText.id)).toMatchObject({
      state: MessageState.Dead,
      payload: text,
      lastError: 'The body is not JSON (stored as text)',
      eventType: 'order.weird',
      aggregateId: null,
    });
    expect(asBinary.status).toBe('dead');
    expect((await row(asBinary.id)).payload).toEqual({ base64: Buffer.from(binary).toString('base64') });
    // Without a message id, the same bytes again are a message of their own (a second dead row), never dropped.
    expect(again).toMatchObject({ status: 'dead' });
    expect(again.id).not.toBe(asText.id);
  });

  it('stores a message the transform rejects as a dead row with the original payload', async () => {
    // Prepare
    const id = randomUUID();
    // Act
    const byFunction = await ingestion().ingest('orders', aMessage({ json: { id, order: 'o-9' } }));
    const byThrow = await ingestion().ingest('orders', aMessage({ json: { id: randomUUID(), total: -1 } }));
    const byJsonata = await ingestion().ingest('mapped', aMessage({ json: { kind: 'test' }, messageId: id }));
    // Assess
    expect(byFunction).toMatchObject({
      status: 'dead',
      reason: 'The transform rejected the message: no total',
    });
    expect(await row(byFunction.id)).toMatchObject({
      state: MessageState.Dead,
      idempotencyKey: id,
      aggregateId: 'o-9',
      payload: { id, order: 'o-9' },
    });
    expect(byThrow.reason).toBe('The transform rejected the message: negative total');
    expect(byJsonata.reason).toBe('The transform rejected the message: test event');
  });

  it('stores a message whose transformed payload the database could not hold as a dead row, not a failure', async () => {
    // A JSONata transform that decodes %00 yields a U+0000 the jsonb column refuses: stored as it is, the insert
    // would fail on every redelivery and block the messages behind it.
    const poison = aMessage({ json: { ref: '%00' }, defaultIdempotencyKey: `t:0:${randomUUID()}` });
    const after = aMessage({
      json: { ref: 'a%20b' },
      defaultIdempotencyKey: `t:0:${randomUUID()}`,
    });
    const rawBig = new TextEncoder().encode('{"ref":"a%20b","big":12345678901234567890}');

    const dead = await ingestion().ingest('decoding', poison);
    const stored = await ingestion().ingest('decoding', { ...after, body: rawBig });

    expect(dead).toMatchObject({
      status: 'dead',
      reason:
        "The transform rejected the message: the transform's result cannot be stored: its payload holds a U+0000 character, which the database cannot store",
    });
    expect(await row(dead.id)).toMatchObject({ state: MessageState.Dead, payload: { ref: '%00' } });
    expect(stored.status).toBe('stored');
    // The transform's result keeps the number the sender wrote.
    const text = JSON.stringify((await row(stored.id)).payload);
    expect(text).toContain('"big":12345678901234567890');
    expect(text).toContain('"ref":"a b"');
  });

  it('redelivers a message whose transform runs out of time like any failure, until deadAfterFailures makes it dead; stores one that grows past the limit or answers what JSON cannot hold as a dead row at once', async () => {
    // Prepare: two failures make a timed-out message dead (deadAfterMs 0).
    const limited = createBrokerIngestion({
      store: store.inbox,
      sources: {
        endless: {
          type: 'amqp',
          transformTimeoutMs: 200,
          deadAfterFailures: 2,
          deadAfterMs: 0,
          transform: { jsonata: '($f := function($n){ $f($n + 1) }; $f(0))' },
        },
        hanging: { type: 'kafka', deadAfterFailures: 2, deadAfterMs: 0, transform: { function: 'hanging' } },
        growing: {
          type: 'nats',
          transform: { jsonata: '{"s": $join($map([1..n], function($i){ "xxxxxxxxxx" }))}' },
        },
        coded: { type: 'amqp', transform: { function: 'bigint' } },
      },
      inbox: { maxBodyBytes: 4096, transformTimeoutMs: 300 },
      transforms: {
        hanging: () => new Promise<TransformResult>(() => {}),
        bigint: () => ({ payload: { n: 10n } }) as unknown as TransformResult,
      },
    });
    const large = 'y'.repeat(8000);
    // Act
    const started = Date.now();
    const endlessMessage = aMessage({ json: { a: 1 }, messageId: randomUUID() });
    const hangingMessage = aMessage({ json: { a: 1 }, messageId: randomUUID() });
    const firstTries = [
      await limited.ingest('endless', endlessMessage).catch((error: unknown) => error),
      await limited.ingest('hanging', hangingMessage).catch((error: unknown) => error),
    ];
    const endless = await limited.ingest('endless', endlessMessage);
    const hanging = await limited.ingest('hanging', hangingMessage);
    const grown = await limited.ingest('growing', aMessage({ json: { n: 1000 }, messageId: randomUUID() }));
    // A message larger than inbox.maxBodyBytes may come out as large as it came in.
    const passed = await limited.ingest(
      'growing',
      aMessage({ json: { n: 700, large }, messageId: randomUUID() }),
    );
    const coded = await limited.ingest('coded', aMessage({ json: { a: 1 }, messageId: randomUUID() }));
    // Assess
    expect(Date.now() - started).toBeLessThan(10_000);
    // The first try of each failed (the broker would redeliver it); the second, its deadAfterFailures'th, is dead.
    expect(firstTries.map((e) => (e as Error).message)).toEqual([
      'transform timed out after 200 ms',
      'transform timed out after 300 ms',
    ]);
    expect(endless.status).toBe('dead');
    expect(endless.status === 'dead' ? endless.reason : '').toContain('transform timed out after 200 ms');
    expect(await row(endless.id)).toMatchObject({ state: MessageState.Dead, payload: { a: 1 } });
    expect(hanging.status === 'dead' ? hanging.reason : '').toContain('transform timed out after 300 ms');
    expect(grown).toMatchObject({
      status: 'dead',
      reason:
        "The transform rejected the message: the transform's result is too large: its payload takes more than the 4096 bytes a source accepts (inbox.maxBodyBytes, or the size of the message received when larger)",
    });
    expect(await row(grown.id)).toMatchObject({ state: MessageState.Dead, payload: { n: 1000 } });
    expect(passed.status).toBe('stored');
    expect(coded).toMatchObject({
      status: 'dead',
      reason:
        "The transform rejected the message: the transform's result cannot be stored: its payload holds a BigInt, which JSON cannot hold",
    });
  });

  it('stores a field of the wrong kind as a dead row saying which', async () => {
    // Act
    const result = await ingestion().ingest(
      'orders',
      aMessage({ json: { id: randomUUID(), order: { x: 1 } } }),
    );
    // Assess
    expect(result.status).toBe('dead');
    expect(result.reason).toBe('The aggregate id at $.order must be a string or a number');
  });

  it('refuses an unknown or HTTP source', async () => {
    // Act / Assess
    await expect(ingestion().ingest('nope', aMessage())).rejects.toBeInstanceOf(UnknownBrokerSourceError);
    await expect(ingestion().ingest('web', aMessage())).rejects.toBeInstanceOf(UnknownBrokerSourceError);
    expect(ingestion().sources).toEqual(['orders', 'plain', 'headerKeyed', 'mapped', 'decoding']);
  });

  it('throws StoreUnavailableError when the database is unreachable, for good and for dead rows', async () => {
    // Prepare: a port nothing listens on
    const down = await openPostgresStore({
      url: 'postgres://postgres@127.0.0.1:1/test',
      schema: schema.name,
    });
    const broken = createBrokerIngestion({ store: down.inbox, sources, transforms });
    try {
      // Act / Assess
      await expect(broken.ingest('orders', aMessage())).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(
        broken.ingest('orders', { body: new TextEncoder().encode('nope'), headers: {} }),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await down.close();
    }
  });

  it('refuses a configuration with an unknown transform function at construction', () => {
    // Act / Assess
    expect(() =>
      createBrokerIngestion({
        store: store.inbox,
        sources: { q: { type: 'amqp', transform: { function: 'x' } } },
      }),
    ).toThrow(/no transform function named "x"/);
  });
});
