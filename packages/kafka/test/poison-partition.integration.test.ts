/**
 * The Kafka consumer-group member with a record no try can store (a transform function that throws on it), on the
 * broker of scripts/kafka.sh and a real PostgreSQL inbox: while the member tries that record again until it goes
 * dead, the member's other partitions go on, and the poisoned partition keeps its order (nothing after the poison
 * record is stored before it).
 */
import { type BrokerIngestionPort, MessageState } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from '../../../test/brokers/support/kafka.ts';
import { eventually, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { createKafkaConsumer } from '../src/index.ts';

const needs = await requireServices('kafka poison record', ['postgres', 'kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];
const db = useBrokerTestStore('kafka_poison', needs.available ? needs.url.postgres : undefined);

let kit: KafkaTestKit;
let kafka: Kafka;

beforeAll(async () => {
  if (!needs.available) return;
  kit = await createKafkaTestKit(brokers);
  kafka = new Kafka({ clientId: 'queuebox-tests', brokers, logLevel: logLevel.NOTHING });
});

afterAll(async () => {
  await kit?.cleanup();
});

/** The partition and offset a default key `topic:partition:offset@ts` names. */
const placeOf = (key: string) => {
  const [, partition, offset] = /:(\d+):(\d+)@/.exec(key) ?? [];
  return { partition: Number(partition), offset: Number(offset) };
};

describe.skipIf(needs.skipReason)('Kafka consumer with a poison record', () => {
  it('stores the other partitions while it retries a poison record, and keeps the poisoned partition in order', async () => {
    // Prepare: partition 0 holds a record the transform throws on, then a healthy one. The poison record goes dead
    // after 3 failures over 6 s; it is tried every 200 ms.
    const topic = await kit.topic('kafka-poison', 2);
    const groupId = kit.group('kafka-poison');
    const source = 'kafka-poison';
    const sources: Sources = {
      [source]: {
        type: 'kafka',
        transform: { function: 'boom' },
        deadAfterFailures: 3,
        deadAfterMs: 6000,
        ...({ brokers, topics: [topic] } as object),
      },
    };
    const real = createBrokerIngestion({
      store: db.store.inbox,
      sources,
      transforms: {
        boom: ({ payload }) => {
          if ((payload as { poison?: boolean }).poison) throw new Error('boom');
          return { payload };
        },
      },
    });
    const calls: { partition: number; offset: number; at: number; failed: boolean }[] = [];
    const ingestion: BrokerIngestionPort = {
      async ingest(s, message) {
        const call = { ...placeOf(message.defaultIdempotencyKey ?? ''), at: Date.now(), failed: false };
        calls.push(call);
        try {
          return await real.ingest(s, message);
        } catch (error) {
          call.failed = true;
          throw error;
        }
      },
    };
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic,
      messages: [
        { partition: 0, value: JSON.stringify({ poison: true }) },
        { partition: 0, value: JSON.stringify({ n: 'after the poison' }) },
      ],
    });
    const consumer = createKafkaConsumer({
      source,
      brokers,
      topics: [topic],
      groupId,
      retryDelayMs: 200,
      ingestion,
    });
    try {
      // Act: partition 1 gets records once the member retries the poison record
      await consumer.start();
      await eventually(
        'the poison record failing',
        () => (calls.some((c) => c.failed) ? true : undefined),
        20_000,
      );
      await producer.send({
        topic,
        messages: [1, 2, 3].map((n) => ({ partition: 1, value: JSON.stringify({ n }) })),
      });
      const otherPartitionStored = await eventually(
        'the records of partition 1 stored',
        async () => {
          const rows = await db.inboxRows(source);
          return rows.filter((r) => placeOf(r.idempotencyKey).partition === 1).length === 3
            ? rows
            : undefined;
        },
        20_000,
      );
      const committed = await eventually(
        'both partitions committed to their end',
        async () => {
          const offsets = await kit.committed(groupId, topic);
          return offsets[0] === '2' && offsets[1] === '3' ? offsets : undefined;
        },
        20_000,
      );

      // Assess: partition 1 did not wait for the poison record to go dead
      expect(otherPartitionStored.filter((r) => placeOf(r.idempotencyKey).partition === 0)).toEqual([]);
      expect(committed).toEqual({ 0: '2', 1: '3' });
      // Partition 0 in offset order: the poison record dead first, then the record after it, tried once only
      const rows = (await db.inboxRows(source)).filter((r) => placeOf(r.idempotencyKey).partition === 0);
      expect(rows.map((r) => [placeOf(r.idempotencyKey).offset, r.state])).toEqual([
        [0, MessageState.Dead],
        [1, MessageState.Pending],
      ]);
      const ofPartition0 = calls.filter((c) => c.partition === 0).map((c) => c.offset);
      expect(ofPartition0.length).toBeGreaterThanOrEqual(4);
      expect(ofPartition0.slice(0, -1).every((offset) => offset === 0)).toBe(true);
      expect(ofPartition0.at(-1)).toBe(1);
      expect(calls.filter((c) => c.partition === 1).map((c) => c.offset)).toEqual([0, 1, 2]);
    } finally {
      await consumer.close();
      await producer.disconnect();
    }
  }, 60_000);
});
