/**
 * The Kafka record key as the header `x-kafka-key`, end to end: records written with kafkajs to a topic of the broker
 * of scripts/kafka.sh, read by the local consumer-group member into a real PostgreSQL inbox. The key is stored as a
 * header (a producer's header of that name is replaced), is the aggregate id with `aggregateIdHeader: x-kafka-key`,
 * and a tombstone's dead row keeps it; `idempotencyKey: { header: x-kafka-key }` reads it too.
 */
import { randomBytes } from 'node:crypto';
import { type InboxRow, MessageState } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import { type Admin, Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { createKafkaConsumer } from '../src/index.ts';

const needs = await requireServices('kafka record key', ['postgres', 'kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];
const db = useBrokerTestStore('kafka_record_key', needs.available ? needs.url.postgres : undefined);

const run = randomBytes(4).toString('hex');
const topic = `kkey-record-key-${run}`;
const groups = [`kkey-record-key-agg-${run}`, `kkey-record-key-idem-${run}`];

let kafka: Kafka;
let admin: Admin;

beforeAll(async () => {
  if (!needs.available) return;
  kafka = new Kafka({ clientId: 'queuebox-tests', brokers, logLevel: logLevel.NOTHING });
  admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
});

afterAll(async () => {
  if (!admin) return;
  await admin.deleteGroups(groups).catch(() => undefined);
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await admin.disconnect();
});

const NOT_TEXT = Buffer.from([0xff, 0x00]);

/** Offsets 0–6 of partition 0, in this order. */
const records = [
  { key: 'order-1', value: '{"n":0}', headers: { 'X-Kafka-Key': 'forged', trace: 't0' } },
  { key: 'order-2', value: '{"n":1}' },
  { key: 'order-1', value: '{"n":2}' },
  { key: 'order-1', value: null }, // a tombstone: a delete on a compacted topic
  { key: null, value: '{"n":4}', headers: { 'x-kafka-key': 'forged' } },
  { key: '', value: '{"n":5}' },
  { key: NOT_TEXT, value: '{"n":6}' },
];

/** Runs a consumer of `topic` for `source` until the source has `count` rows, then stops it. */
async function consume(
  source: string,
  sources: Sources,
  groupId: string,
  count: number,
): Promise<InboxRow[]> {
  const consumer = createKafkaConsumer({
    source,
    brokers,
    topics: [topic],
    groupId,
    ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
  });
  await consumer.start();
  try {
    return await eventually(
      `${count} rows of ${source}`,
      async () => {
        const rows = await db.inboxRows(source);
        return rows.length >= count ? rows : undefined;
      },
      30_000,
    );
  } finally {
    await consumer.close();
  }
}

describe.skipIf(needs.skipReason)('the Kafka record key from the local consumer', () => {
  beforeAll(async () => {
    const producer = kafka.producer();
    await producer.connect();
    try {
      await producer.send({ topic, messages: records.map((r) => ({ partition: 0, ...r })) });
    } finally {
      await producer.disconnect();
    }
  });

  it('stores the key as x-kafka-key and the aggregate id, a tombstone dead with its key', async () => {
    // Prepare
    const source = 'kkey-aggregate';
    const sources: Sources = {
      [source]: {
        type: 'kafka',
        aggregateIdHeader: 'X-Kafka-Key',
        ...({ brokers, topics: [topic] } as object),
      },
    };

    // Act
    const rows = await consume(source, sources, groups[0] as string, records.length);

    // Assess
    const notText = `base64:${NOT_TEXT.toString('base64')}`;
    expect(rows.map((r) => [r.headers, r.aggregateId, r.state])).toEqual([
      [{ 'x-kafka-key': 'order-1', trace: 't0' }, 'order-1', MessageState.Pending],
      [{ 'x-kafka-key': 'order-2' }, 'order-2', MessageState.Pending],
      [{ 'x-kafka-key': 'order-1' }, 'order-1', MessageState.Pending],
      [{ 'x-kafka-key': 'order-1' }, 'order-1', MessageState.Dead],
      [{}, null, MessageState.Pending],
      // An empty key is an empty header, which counts as no aggregate id.
      [{ 'x-kafka-key': '' }, null, MessageState.Pending],
      [{ 'x-kafka-key': notText }, notText, MessageState.Pending],
    ]);
    expect(rows[3]?.lastError).toMatch(/not JSON/);
    expect(rows.map((r) => r.idempotencyKey.replace(/@\d+$/, ''))).toEqual(
      records.map((_, offset) => `${topic}:0:${offset}`),
    );
  });

  it('reads it as the idempotency key, even when keepHeaders leaves it out of the stored headers', async () => {
    // Prepare: the key names the message, so a later record of a key is a duplicate of its first.
    const source = 'kkey-idempotency';
    const sources: Sources = {
      [source]: {
        type: 'kafka',
        idempotencyKey: { header: 'x-kafka-key' },
        keepHeaders: ['trace'],
        ...({ brokers, topics: [topic] } as object),
      },
    };
    const seen: string[] = [];
    const ingestion = createBrokerIngestion({ store: db.store.inbox, sources });
    const consumer = createKafkaConsumer({
      source,
      brokers,
      topics: [topic],
      groupId: groups[1] as string,
      ingestion,
      onIngested: (result) => seen.push(result.status),
    });

    // Act
    await consumer.start();
    try {
      await eventually(
        'every record ingested',
        () => (seen.length >= records.length ? true : undefined),
        30_000,
      );
    } finally {
      await consumer.close();
    }

    // Assess
    const rows = await db.inboxRows(source);
    expect(seen).toEqual(['stored', 'stored', 'duplicate', 'duplicate', 'stored', 'stored', 'stored']);
    expect(rows.map((r) => [r.idempotencyKey.replace(/@\d+$/, ''), r.headers])).toEqual([
      ['order-1', { trace: 't0' }],
      ['order-2', {}],
      // No key, and an empty one: the default key.
      [`${topic}:0:4`, {}],
      [`${topic}:0:5`, {}],
      [`base64:${NOT_TEXT.toString('base64')}`, {}],
    ]);
  });
});
