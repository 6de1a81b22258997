/** Kafka helpers for tests: unique topics created and deleted, and a real consumer that reads a topic back. */
import { randomBytes } from 'node:crypto';
import { type Admin, Kafka, type KafkaMessage, logLevel } from 'kafkajs';

export interface ReadRecord {
  readonly partition: number;
  readonly offset: string;
  readonly key: string | null;
  readonly value: string | null;
  readonly headers: Record<string, string>;
}

export interface KafkaTestKit {
  readonly admin: Admin;
  /** Creates a topic with a unique name (`qb-test-<label>-<random>`), deleted by `cleanup`. */
  topic(label: string, partitions: number): Promise<string>;
  /** A unique consumer-group id, deleted by `cleanup`. */
  group(label: string): string;
  /** Reads `count` records of `topic` from the beginning with a real consumer group, then leaves. */
  read(topic: string, count: number, timeoutMs?: number): Promise<ReadRecord[]>;
  /** The offset committed by `groupId` for each partition of `topic` (`-1` when none). */
  committed(groupId: string, topic: string): Promise<Record<number, string>>;
  /** Writes raw records to `topic` (partition 0 unless given). */
  produce(
    topic: string,
    records: readonly {
      value: string | Buffer;
      key?: string;
      headers?: Record<string, string | Buffer>;
    }[],
  ): Promise<void>;
  cleanup(): Promise<void>;
}

function toRead(partition: number, message: KafkaMessage): ReadRecord {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value.toString();
  }
  return {
    partition,
    offset: message.offset,
    key: message.key?.toString() ?? null,
    value: message.value?.toString() ?? null,
    headers,
  };
}

export async function createKafkaTestKit(brokers: readonly string[]): Promise<KafkaTestKit> {
  const kafka = new Kafka({ clientId: 'queuebox-tests', brokers: [...brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer();
  await producer.connect();
  const topics: string[] = [];
  const groups: string[] = [];
  const run = randomBytes(4).toString('hex');
  const group = (label: string) => {
    const id = `qb-test-${label}-${run}-${randomBytes(3).toString('hex')}`;
    groups.push(id);
    return id;
  };
  return {
    admin,
    async topic(label, partitions) {
      const name = `qb-test-${label}-${run}`;
      await admin.createTopics({
        topics: [{ topic: name, numPartitions: partitions }],
        waitForLeaders: true,
      });
      topics.push(name);
      return name;
    },
    group,
    async read(topic, count, timeoutMs = 15_000) {
      const groupId = group('reader');
      const consumer = kafka.consumer({ groupId });
      const records: ReadRecord[] = [];
      await consumer.connect();
      try {
        await consumer.subscribe({ topic, fromBeginning: true });
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(
            () =>
              reject(new Error(`read ${records.length} of ${count} records of ${topic} in ${timeoutMs} ms`)),
            timeoutMs,
          );
          consumer
            .run({
              eachMessage: async ({ partition, message }) => {
                records.push(toRead(partition, message));
                if (records.length >= count) {
                  clearTimeout(timer);
                  resolve();
                }
              },
            })
            .catch(reject);
        });
      } finally {
        await consumer.disconnect();
      }
      return records;
    },
    async committed(groupId, topic) {
      const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return Object.fromEntries((entry?.partitions ?? []).map((p) => [p.partition, p.offset]));
    },
    async produce(topic, records) {
      await producer.send({
        topic,
        messages: records.map((r) => ({
          partition: 0,
          key: r.key ?? null,
          value: r.value,
          headers: r.headers,
        })),
      });
    },
    async cleanup() {
      await producer.disconnect();
      if (groups.length > 0) await admin.deleteGroups(groups).catch(() => undefined);
      if (topics.length > 0) await admin.deleteTopics({ topics }).catch(() => undefined);
      await admin.disconnect();
    },
  };
}
