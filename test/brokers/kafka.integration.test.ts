/**
 * Kafka end to end, on the broker of scripts/kafka.sh (or QUEUEBOX_TEST_KAFKA_BROKERS) and a real PostgreSQL:
 * outbox rows through the poller and the idempotent producer, read back in per-key order; a topic through the
 * consumer group (and the MSK handler) into the inbox.
 */
import { randomUUID } from 'node:crypto';
import { MessageState, StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import type { KafkaLambdaEvent } from '@queuebox/kafka';
import { createKafkaConsumer, createKafkaEventHandler, kafkaPublisherFactory } from '@queuebox/kafka';
import { createTransformRegistry } from '@queuebox/outbox';
import { openPostgresStore } from '@queuebox/store-postgres';
import { messageIdsOf, requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from './support/kafka.ts';
import { brokerPoller } from './support/poller.ts';
import { deadStoreUrl, eventually, useBrokerTestStore } from './support/store.ts';

const needs = await requireServices('kafka e2e', ['postgres', 'kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];
const db = useBrokerTestStore('kafka_e2e', needs.available ? needs.url.postgres : undefined);

let kit: KafkaTestKit;
let outTopic: string;
let inTopic: string;

beforeAll(async () => {
  if (!needs.available) return;
  kit = await createKafkaTestKit(brokers);
  outTopic = await kit.topic('e2e-out', 4);
  inTopic = await kit.topic('e2e-in', 1);
});

afterAll(async () => {
  await kit?.cleanup();
});

function sourcesFor(topic: string): Sources {
  return {
    'events-in': {
      type: 'kafka',
      idempotencyKey: { header: 'message-id' },
      eventTypePath: '$.kind',
      aggregateIdPath: '$.order',
      transform: { jsonata: 'kind = "test" ? $reject("test events are not stored") : $' },
      // packages/config's kafka fields, read by the handler
      ...({ brokers, topics: [topic] } as object),
    },
  };
}

describe.skipIf(needs.skipReason)('Kafka end to end', () => {
  it('delivers many rows of several keys in per-key order, each key on one partition, intact', async () => {
    // Prepare: rows of 8 keys interleaved, inserted in one go
    const keys = Array.from({ length: 8 }, (_, i) => `key-${i}`);
    const rows = Array.from({ length: 240 }, (_, i) => ({
      topic: 'orders.changed',
      key: keys[i % keys.length] ?? null,
      payload: { seq: i, key: keys[i % keys.length] ?? null },
      headers: { 'x-seq': String(i) },
      maxAttempts: 5,
    }));
    const ids = await db.store.outbox.insert(rows);
    const poller = brokerPoller(
      db.store,
      { type: 'kafka', brokers, topic: outTopic },
      kafkaPublisherFactory,
      {
        batchSize: 100,
        claimTimeoutMs: 30_000,
        maxAttempts: 5,
        backoff: { baseMs: 100, maxMs: 100 },
      },
    );
    try {
      // Act
      let sent = 0;
      for (let i = 0; i < 20 && sent < rows.length; i++) {
        sent += (await poller.drain()).sent;
      }
      const records = await kit.read(outTopic, rows.length);
      // Assess
      expect(sent).toBe(rows.length);
      expect(records).toHaveLength(rows.length);
      const idOf = new Map((await messageIdsOf(db.store, ids)).map((id, i) => [id, i]));
      for (const key of keys) {
        const ofKey = records.filter((r) => r.key === key);
        expect(ofKey).toHaveLength(rows.length / keys.length);
        expect(new Set(ofKey.map((r) => r.partition)).size).toBe(1);
        const seqs = ofKey
          .sort((a, b) => Number(BigInt(a.offset) - BigInt(b.offset)))
          .map((r) => (JSON.parse(r.value ?? '') as { seq: number }).seq);
        expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
        for (const record of ofKey) {
          const seq = (JSON.parse(record.value ?? '') as { seq: number }).seq;
          expect(idOf.get(record.headers['message-id'] ?? '')).toBe(seq);
          expect(record.headers['x-seq']).toBe(String(seq));
        }
      }
      expect(new Set(records.map((r) => r.partition)).size).toBeGreaterThan(1);
    } finally {
      await poller.close();
    }
  });

  it('dead-letters a row whose transform returns a header value that is not text; the rows beside it are sent', async () => {
    // Prepare: a destination transform registered in code that sets x-tenant from the payload, a number for some
    const target = await kit.topic('e2e-hdr', 2);
    const transforms = createTransformRegistry({
      tenant: ({ payload }) => {
        const { tenant } = payload as { tenant: never };
        return { payload, headers: { 'x-tenant': tenant === 'nan' ? (Number.NaN as never) : tenant } };
      },
    });
    const tenants: unknown[] = ['t-1', 7, 't-2', 'nan', 't-3', 't-4'];
    const ids = await db.store.outbox.insert(
      tenants.map((tenant, i) => ({
        topic: 'orders.tenanted',
        key: `hdr-${i}`,
        payload: { tenant: tenant as string, i },
        headers: {},
        maxAttempts: 5,
      })),
    );
    const poller = brokerPoller(
      db.store,
      { type: 'kafka', brokers, topic: target, transform: { function: 'tenant' } },
      kafkaPublisherFactory,
      { batchSize: 100, claimTimeoutMs: 30_000, maxAttempts: 5, backoff: { baseMs: 100, maxMs: 100 } },
      transforms,
    );
    try {
      // Act
      await poller.drain();
      const rows = (await db.outboxRows()).filter((row) => ids.includes(row.id));
      // Assess: before the fix the numeric headers reached kafkajs, which failed the whole request, every row a retry
      const stateOf = (i: number) => rows.find((row) => row.id === ids[i]);
      for (const i of [1, 3]) {
        expect(stateOf(i)).toMatchObject({
          state: MessageState.Dead,
          lastError: expect.stringMatching(/header "x-tenant" with a value that is not a string \(number\)/),
        });
      }
      for (const i of [0, 2, 4, 5]) expect(stateOf(i)?.state).toBe(MessageState.Sent);
      const records = await kit.read(target, 4);
      expect(records.map((r) => r.headers['x-tenant']).sort()).toEqual(['t-1', 't-2', 't-3', 't-4']);
    } finally {
      await poller.close();
    }
  });

  it('consumes into the inbox: a repeated message id is one row, poison is dead, header bytes with 0x00 are stored as base64, offsets committed after storing', async () => {
    // Prepare
    const groupId = kit.group('source');
    const sources = sourcesFor(inTopic);
    const consumer = createKafkaConsumer({
      source: 'events-in',
      brokers,
      topics: [inTopic],
      groupId,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
    });
    const id = randomUUID();
    await kit.produce(inTopic, [
      {
        value: JSON.stringify({ kind: 'order.created', order: 'o-1' }),
        headers: { 'message-id': id, 'x-trace': 't' },
      },
      { value: JSON.stringify({ kind: 'order.created', order: 'o-1' }), headers: { 'message-id': id } },
      { value: 'not json at all', headers: { 'message-id': `poison-${id}` } },
      { value: JSON.stringify({ kind: 'test', order: 'o-2' }), headers: { 'message-id': `test-${id}` } },
      // Issue 13: before, PostgreSQL refused this row on every retry and the partition stalled behind it.
      {
        value: JSON.stringify({ kind: 'order.created', order: 'o-3' }),
        headers: { 'message-id': `nul-${id}`, 'x-trace': Buffer.from([0x61, 0x00, 0x62]) },
      },
    ]);
    try {
      // Act
      await consumer.start();
      const committed = await eventually('all five offsets committed', async () => {
        const offsets = await kit.committed(groupId, inTopic);
        return offsets[0] === '5' ? offsets : undefined;
      });
      const rows = await db.inboxRows('events-in');
      // Assess
      expect(committed).toEqual({ 0: '5' });
      expect(rows).toHaveLength(4);
      const byKey = new Map(rows.map((r) => [r.idempotencyKey, r]));
      expect(byKey.get(id)).toMatchObject({
        state: MessageState.Pending,
        eventType: 'order.created',
        aggregateId: 'o-1',
        payload: { kind: 'order.created', order: 'o-1' },
        headers: { 'message-id': id, 'x-trace': 't' },
      });
      expect(byKey.get(`poison-${id}`)).toMatchObject({
        state: MessageState.Dead,
        payload: 'not json at all',
      });
      expect(byKey.get(`test-${id}`)).toMatchObject({
        state: MessageState.Dead,
        lastError: 'The transform rejected the message: test events are not stored',
      });
      expect(byKey.get(`nul-${id}`)).toMatchObject({
        state: MessageState.Pending,
        headers: { 'x-trace': `base64:${Buffer.from([0x61, 0x00, 0x62]).toString('base64')}` },
      });
    } finally {
      await consumer.close();
    }
  });

  it('commits nothing while the database is down; the next member of the group stores the record', async () => {
    // Prepare
    const groupId = kit.group('outage');
    const sources = sourcesFor(inTopic);
    const down = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
    const failures: unknown[] = [];
    const broken = createKafkaConsumer({
      source: 'events-in',
      brokers,
      topics: [inTopic],
      groupId,
      retryDelayMs: 50,
      ingestion: createBrokerIngestion({ store: down.inbox, sources }),
      onError: (error) => failures.push(error),
    });
    try {
      // Act: the group starts at the beginning of the topic (offset 0)
      await broken.start();
      await eventually('two failed attempts', () => (failures.length >= 2 ? true : undefined));
      await broken.close();
      const whileDown = await kit.committed(groupId, inTopic);
      const healthy = createKafkaConsumer({
        source: 'events-in',
        brokers,
        topics: [inTopic],
        groupId,
        ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      });
      await healthy.start();
      const after = await eventually('the offsets committed', async () => {
        const offsets = await kit.committed(groupId, inTopic);
        // The topic holds the five records of the test before.
        return offsets[0] === '5' ? offsets : undefined;
      });
      await healthy.close();
      // Assess
      expect(failures[0]).toBeInstanceOf(StoreUnavailableError);
      expect(whileDown).toEqual({ 0: '-1' });
      expect(after).toEqual({ 0: '5' });
    } finally {
      await broken.close();
      await down.close();
    }
  });

  it('joins the group again after a crash kafkajs does not restart from, and stores the rest of the partition', async () => {
    // Prepare: the first record's onIngested throws a TypeError, a bug kafkajs will not retry: it leaves the group.
    const topic = await kit.topic('crash-in', 1);
    const groupId = kit.group('crash');
    const errors: string[] = [];
    let thrown = false;
    const consumer = createKafkaConsumer({
      source: 'events-in',
      brokers,
      topics: [topic],
      groupId,
      retryDelayMs: 200,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources: sourcesFor(topic) }),
      onIngested: () => {
        if (thrown) return;
        thrown = true;
        throw new TypeError('a bug in a hook');
      },
      onError: (error, { during }) => errors.push(`${during}: ${(error as Error).message}`),
    });
    const run = randomUUID();
    await kit.produce(
      topic,
      [1, 2, 3].map((n) => ({
        value: JSON.stringify({ kind: 'order.created', order: `o-${n}` }),
        headers: { 'message-id': `crash-${n}-${run}` },
      })),
    );
    try {
      // Act
      await consumer.start();
      const committed = await eventually('all three offsets committed after the crash', async () => {
        const offsets = await kit.committed(groupId, topic);
        return offsets[0] === '3' ? offsets : undefined;
      });
      // Assess
      expect(committed).toEqual({ 0: '3' });
      expect(errors.some((e) => e.startsWith('consume:') && e.includes('a bug in a hook'))).toBe(true);
      const keys = (await db.inboxRows('events-in')).map((r) => r.idempotencyKey);
      expect(keys.filter((k) => k.endsWith(run)).sort()).toEqual([1, 2, 3].map((n) => `crash-${n}-${run}`));
    } finally {
      await consumer.close();
    }
  });

  it('holds a partition behind a record whose transform function throws only until it is a dead row; the records behind it follow in order', async () => {
    // Prepare: one partition, the second of four records poison to the source's transform function
    const topic = await kit.topic('poison-in', 1);
    const groupId = kit.group('poison');
    const run = randomUUID();
    const sources: Sources = {
      'events-in': {
        type: 'kafka',
        idempotencyKey: { header: 'message-id' },
        transform: { function: 'amounts' },
        deadAfterFailures: 3,
        deadAfterMs: 0,
        ...({ brokers, topics: [topic] } as object),
      },
    };
    const errors: string[] = [];
    const consumer = createKafkaConsumer({
      source: 'events-in',
      brokers,
      topics: [topic],
      groupId,
      retryDelayMs: 50,
      ingestion: createBrokerIngestion({
        store: db.store.inbox,
        sources,
        transforms: {
          amounts: ({ payload }) => {
            const { amount } = payload as { amount: { cents: number } };
            return { payload: { cents: amount.cents } };
          },
        },
      }),
      onError: (error, { during }) => errors.push(`${during}: ${(error as Error).message}`),
    });
    await kit.produce(
      topic,
      [{ amount: { cents: 1 } }, { amount: null }, { amount: { cents: 3 } }, { amount: { cents: 4 } }].map(
        (value, n) => ({ value: JSON.stringify(value), headers: { 'message-id': `p${n}-${run}` } }),
      ),
    );
    try {
      // Act
      await consumer.start();
      const committed = await eventually('all four offsets committed', async () => {
        const offsets = await kit.committed(groupId, topic);
        return offsets[0] === '4' ? offsets : undefined;
      });
      // Assess
      expect(committed).toEqual({ 0: '4' });
      expect(errors.filter((e) => e.startsWith('ingest:'))).toHaveLength(2);
      const rows = (await db.inboxRows('events-in')).filter((r) => r.idempotencyKey.endsWith(run));
      expect(rows.map((r) => [r.idempotencyKey, r.state, r.payload])).toEqual([
        [`p0-${run}`, MessageState.Pending, { cents: 1 }],
        [`p1-${run}`, MessageState.Dead, { amount: null }],
        [`p2-${run}`, MessageState.Pending, { cents: 3 }],
        [`p3-${run}`, MessageState.Pending, { cents: 4 }],
      ]);
      expect(rows[1]?.lastError).toMatch(
        /^The ingestion failed 3 times since .* \(not a database outage\), last with: .*null/,
      );
    } finally {
      await consumer.close();
    }
  });

  it('turns a record an MSK batch fails on into a dead row after as many invocations, then completes the batch', async () => {
    // Prepare: Lambda's event source mapping invokes again with the same batch after each failure
    const topic = `msk-poison-${randomUUID()}`;
    const sources: Sources = {
      'msk-poison': {
        type: 'kafka',
        transform: { function: 'strict' },
        deadAfterFailures: 2,
        deadAfterMs: 0,
        ...({ brokers, topics: [topic] } as object),
      },
    };
    const record = (offset: number, value: string) => ({
      topic,
      partition: 0,
      offset,
      timestamp: 1764489600000,
      timestampType: 'CREATE_TIME' as const,
      key: Buffer.from('k').toString('base64'),
      value: Buffer.from(value).toString('base64'),
      headers: [],
    });
    const event: KafkaLambdaEvent = {
      eventSource: 'aws:kafka',
      eventSourceArn:
        'arn:aws:kafka:eu-west-1:111122223333:cluster/qb/751d2973-a626-431c-9d4e-d7975eb44dd7-2',
      bootstrapServers: 'b-1.qb.abc123.c2.kafka.eu-west-1.amazonaws.com:9098',
      records: { [`${topic}-0`]: [record(7, '{"ok":1}'), record(8, '{"ok":false}'), record(9, '{"ok":3}')] },
    };
    const handler = createKafkaEventHandler({
      ingestion: createBrokerIngestion({
        store: db.store.inbox,
        sources,
        transforms: {
          strict: ({ payload }) => {
            if ((payload as { ok: unknown }).ok === false) throw new RangeError('ok must be a number');
            return { payload };
          },
        },
      }),
      sources,
    });
    // Act
    await expect(handler(event)).rejects.toThrow('ok must be a number');
    const second = await handler(event);
    // A redelivery of the whole batch (the answer lost) runs the transform again, before the duplicate check: it
    // comes to the same rows after as many invocations.
    await expect(handler(event)).rejects.toThrow('ok must be a number');
    const again = await handler(event);
    // Assess
    expect(second).toEqual({ stored: 1, duplicate: 1, dead: 1, wakeRelay: true });
    expect(again).toEqual({ stored: 0, duplicate: 3, dead: 0, wakeRelay: false });
    const rows = await db.inboxRows('msk-poison');
    expect(rows.map((r) => [r.idempotencyKey, r.state])).toEqual([
      [`${topic}:0:7@1764489600000`, MessageState.Pending],
      [`${topic}:0:8@1764489600000`, MessageState.Dead],
      [`${topic}:0:9@1764489600000`, MessageState.Pending],
    ]);
  });

  it('stores the records of a real-shaped MSK event with topic:partition:offset@timestamp keys, and fails the batch when the database is down', async () => {
    // Prepare
    const topic = `msk-${randomUUID()}`;
    const sources: Sources = { msk: { type: 'kafka', ...({ brokers, topics: [topic] } as object) } };
    const record = (offset: number, value: string, headers: Record<string, string> = {}) => ({
      topic,
      partition: 2,
      offset,
      timestamp: 1764489600000,
      timestampType: 'CREATE_TIME' as const,
      key: Buffer.from('order-7').toString('base64'),
      value: Buffer.from(value).toString('base64'),
      headers: Object.entries(headers).map(([name, v]) => ({ [name]: [...Buffer.from(v)] })),
    });
    const event: KafkaLambdaEvent = {
      eventSource: 'aws:kafka',
      eventSourceArn:
        'arn:aws:kafka:eu-west-1:111122223333:cluster/qb/751d2973-a626-431c-9d4e-d7975eb44dd7-2',
      bootstrapServers: 'b-1.qb.abc123.c2.kafka.eu-west-1.amazonaws.com:9098',
      records: {
        [`${topic}-2`]: [
          record(100, '{"order":"o-7"}', { 'X-Correlation-Id': 'corr-k' }),
          record(101, '\u0000\u0001'),
        ],
      },
    };
    const handler = createKafkaEventHandler({
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      sources,
    });
    const down = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
    const broken = createKafkaEventHandler({
      ingestion: createBrokerIngestion({ store: down.inbox, sources }),
      sources,
    });
    try {
      // Act
      const first = await handler(event);
      const second = await handler(event);
      const failed = broken(event);
      // Assess
      expect(first).toEqual({ stored: 1, duplicate: 0, dead: 1, wakeRelay: true });
      expect(second).toEqual({ stored: 0, duplicate: 2, dead: 0, wakeRelay: false });
      await expect(failed).rejects.toBeInstanceOf(StoreUnavailableError);
      const rows = await db.inboxRows('msk');
      expect(rows.map((r) => [r.idempotencyKey, r.state])).toEqual([
        [`${topic}:2:100@1764489600000`, MessageState.Pending],
        [`${topic}:2:101@1764489600000`, MessageState.Dead],
      ]);
      expect(rows[0]).toMatchObject({ correlationId: 'corr-k', payload: { order: 'o-7' } });
      expect(rows[1]?.payload).toEqual({ base64: Buffer.from('\u0000\u0001').toString('base64') });
    } finally {
      await down.close();
    }
  });
});
