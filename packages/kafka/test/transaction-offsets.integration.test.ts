/**
 * The Kafka consumer-group member on a partition written by a transactional producer, on the broker of
 * scripts/kafka.sh and a real PostgreSQL inbox: the group's committed offset reaches the partition's end (lag zero)
 * past the transaction markers and the records of aborted transactions, which are never stored.
 */
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from '../../../test/brokers/support/kafka.ts';
import { eventually, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { createKafkaConsumer } from '../src/index.ts';

const needs = await requireServices('kafka transaction offsets', ['postgres', 'kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];
const db = useBrokerTestStore('kafka_txn', needs.available ? needs.url.postgres : undefined);

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

/** Writes `values` to partition 0 of `topic` in one transaction, committed or aborted. */
async function inTransaction(producer: Producer, topic: string, values: string[], end: 'commit' | 'abort') {
  const transaction = await producer.transaction();
  await transaction.send({ topic, messages: values.map((value) => ({ partition: 0, value })) });
  await transaction[end]();
}

/** The partition's end offset (the high watermark: past its last record or marker). */
async function endOffset(topic: string): Promise<string | undefined> {
  return (await kit.admin.fetchTopicOffsets(topic)).find((p) => p.partition === 0)?.high;
}

describe.skipIf(needs.skipReason)('Kafka consumer on a transactional partition', () => {
  it('commits past the transaction markers and aborted records, so the lag reaches zero', async () => {
    // Prepare: a committed transaction of two records (offsets 0, 1; its marker at 2)
    const topic = await kit.topic('kafka-txn', 1);
    const groupId = kit.group('kafka-txn');
    const source = 'kafka-txn';
    const sources: Sources = { [source]: { type: 'kafka', ...({ brokers, topics: [topic] } as object) } };
    const producer = kafka.producer({
      transactionalId: `${topic}-producer`,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    await inTransaction(producer, topic, ['{"n":1}', '{"n":2}'], 'commit');
    const consumer = createKafkaConsumer({
      source,
      brokers,
      topics: [topic],
      groupId,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
    });
    try {
      // Act: the member stores the committed records; then an aborted transaction follows (3, 4; marker 5), which
      // reaches the member as a batch with no record to store
      await consumer.start();
      const afterCommitted = await eventually(
        'the committed transaction committed to its marker',
        async () => {
          const committed = (await kit.committed(groupId, topic))[0];
          return committed === (await endOffset(topic)) ? committed : undefined;
        },
        20_000,
      );
      await inTransaction(producer, topic, ['{"n":3}', '{"n":4}'], 'abort');
      // The abort answers before the broker wrote its markers, and until then the end offset (the last stable
      // offset) still stands where the committed transaction ended: an end that has not moved is not the one to
      // wait for (a clean-clone CI run saw '3' here).
      const afterAborted = await eventually(
        'the aborted transaction committed past',
        async () => {
          const committed = (await kit.committed(groupId, topic))[0];
          const end = await endOffset(topic);
          return end !== afterCommitted && committed === end ? committed : undefined;
        },
        20_000,
      );

      // Assess
      expect(afterCommitted).toBe('3');
      expect(afterAborted).toBe('6');
      expect((await db.inboxRows(source)).map((r) => r.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    } finally {
      await consumer.close();
      await producer.disconnect();
    }
  }, 60_000);
});
