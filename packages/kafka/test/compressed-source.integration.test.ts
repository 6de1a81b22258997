/**
 * The Kafka source reading record batches that Kafka's own Java producer compressed with zstd, lz4 and snappy
 * (kafkajs alone reads only gzip and failed the whole fetch, so the partition never advanced, not even past the
 * plain record before the compressed batch). The batches are written by `kafka.tools.ConsoleProducer` from the jars
 * scripts/kafka.sh fetched, since kafkajs cannot write these codecs.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { BrokerIngestionPort, BrokerMessage } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import kafkajs from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from '../../../test/brokers/support/kafka.ts';
import { createKafkaClient, createKafkaConsumer, kafkaDecompressionCodecs } from '../src/index.ts';

const needs = await requireServices('kafka compressed source', ['kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];

/** The jars of scripts/kafka.sh (its defaults), which hold Kafka's console producer. */
const kafkaHome =
  process.env.QUEUEBOX_KAFKA_HOME ??
  join(homedir(), '.cache', 'queuebox', `kafka-${process.env.QUEUEBOX_KAFKA_VERSION ?? '4.1.2'}`);
const kafkaLib = join(kafkaHome, 'lib');
const skipReason =
  needs.skipReason ??
  (existsSync(kafkaLib)
    ? undefined
    : `no Kafka jars at ${kafkaLib} (bash scripts/kafka.sh start fetches them)`);

/** Writes `lines` (one record each, no key) to partition 0 of `topic` with Kafka's Java producer and `codec`. */
async function javaProduce(topic: string, codec: string, lines: readonly string[]): Promise<void> {
  const child = execFile(
    'java',
    [
      '-Xmx256m',
      '-cp',
      `${kafkaLib}/*`,
      `-Dlog4j2.configurationFile=${join(kafkaHome, 'log4j2.properties')}`,
      '-Dqueuebox.kafka.logLevel=ERROR',
      'org.apache.kafka.tools.ConsoleProducer',
      '--bootstrap-server',
      brokers[0] ?? '',
      '--topic',
      topic,
      '--compression-codec',
      codec,
      // One batch for all lines, as a busy Java producer writes them.
      '--producer-property',
      'linger.ms=500',
      '--producer-property',
      'batch.size=4000000',
      '--producer-property',
      'max.request.size=4000000',
    ],
    { timeout: 60_000 },
  );
  const exited = promisify((cb: (error: Error | null) => void) =>
    child.once('exit', (code) => cb(code === 0 ? null : new Error(`ConsoleProducer exited with ${code}`))),
  )();
  child.stdin?.end(`${lines.join('\n')}\n`);
  await exited;
}

/** An inbox that keeps what it is given, in order. */
function memoryIngestion(): BrokerIngestionPort & { readonly messages: BrokerMessage[] } {
  const messages: BrokerMessage[] = [];
  return {
    messages,
    async ingest(_source, message) {
      messages.push(message);
      return { status: 'stored', id: String(messages.length), wakeRelay: false };
    },
  };
}

async function eventually<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

let kit: KafkaTestKit;

beforeAll(async () => {
  if (needs.skipReason) return;
  kit = await createKafkaTestKit(brokers);
});

afterAll(async () => {
  await kit?.cleanup();
});

const text = (message: BrokerMessage) => Buffer.from(message.body).toString('utf8');

describe.skipIf(skipReason)('Kafka source reading compressed batches of the Java producer', () => {
  it.each(['zstd', 'lz4', 'snappy'])(
    'stores every record around and inside a %s batch, in order',
    async (codec) => {
      // Prepare: plain, then one compressed batch of small, incompressible and large (several blocks) records, then plain
      const topic = await kit.topic(`codec-${codec}`, 1);
      const compressed = Array.from({ length: 40 }, (_, i) =>
        JSON.stringify({
          n: i,
          text: i % 3 === 0 ? randomBytes(400).toString('base64') : `${codec}-ü-€-${'abc'.repeat(40)}`,
          ...(i === 7 ? { big: `${randomBytes(60_000).toString('base64')}${'x'.repeat(150_000)}` } : {}),
        }),
      );
      await kit.produce(topic, [{ value: '{"n":"before"}' }]);
      await javaProduce(topic, codec, compressed);
      await kit.produce(topic, [{ value: '{"n":"after"}' }]);
      const ingestion = memoryIngestion();
      const errors: unknown[] = [];
      const consumer = createKafkaConsumer({
        source: 'events',
        brokers,
        topics: [topic],
        groupId: kit.group(`codec-${codec}`),
        ingestion,
        onError: (error) => errors.push(error),
      });
      try {
        // Act
        await consumer.start();
        await eventually('all records stored', () =>
          ingestion.messages.length >= compressed.length + 2 ? true : undefined,
        );
        // Assess
        expect(ingestion.messages.map(text)).toEqual(['{"n":"before"}', ...compressed, '{"n":"after"}']);
        expect(ingestion.messages.map((m) => m.defaultIdempotencyKey)).toEqual(
          Array.from({ length: compressed.length + 2 }, (_, i) =>
            expect.stringMatching(new RegExp(`^${topic}:0:${i}@\\d{13}$`)),
          ),
        );
        expect(errors).toEqual([]);
      } finally {
        await consumer.close();
      }
    },
  );

  it('reports a batch it cannot decompress with the partition and committed offset, and goes on once it can', async () => {
    // Prepare: a zstd batch behind one stored record; the decoder sees it truncated, as a corrupt batch
    const topic = await kit.topic('codec-broken', 1);
    await kit.produce(topic, [{ value: '{"n":"first"}' }]);
    const groupId = kit.group('codec-broken');
    const ingestion = memoryIngestion();
    const errors: Error[] = [];
    const options = {
      source: 'events',
      brokers,
      topics: [topic],
      groupId,
      ingestion,
      retryDelayMs: 200,
      onError: (error: unknown) => errors.push(error as Error),
    };
    const first = createKafkaConsumer(options);
    await first.start();
    await eventually('the first record stored', () => (ingestion.messages.length === 1 ? true : undefined));
    await eventually('its offset committed', async () =>
      (await kit.committed(groupId, topic))[0] === '1' ? true : undefined,
    );
    await first.close();
    await javaProduce(topic, 'zstd', ['{"n":"zstd"}']);
    await kit.produce(topic, [{ value: '{"n":"last"}' }]);
    const { CompressionCodecs, CompressionTypes } = kafkajs;
    const working = CompressionCodecs[CompressionTypes.ZSTD];
    const zstd = working();
    // A truncated frame, as a corrupt batch would be
    CompressionCodecs[CompressionTypes.ZSTD] = () => ({
      ...zstd,
      decompress: (buffer: Buffer) => zstd.decompress(buffer.subarray(0, buffer.length - 3)),
    });
    const consumer = createKafkaConsumer(options);
    try {
      // Act
      await consumer.start();
      const reported = await eventually('a decode error reported', () =>
        errors.find((e) => e.name === 'KafkaFetchDecodeError'),
      );
      const storedMeanwhile = ingestion.messages.length;
      CompressionCodecs[CompressionTypes.ZSTD] = working;
      await eventually('the rest stored', () => (ingestion.messages.length >= 3 ? true : undefined));
      // Assess
      expect(reported.message).toContain(`${topic}/0 at committed offset 1`);
      expect(reported.message).toMatch(/could not decompress a zstd record batch of \d+ bytes: /);
      expect(storedMeanwhile).toBe(1);
      expect(ingestion.messages.map(text)).toEqual(['{"n":"first"}', '{"n":"zstd"}', '{"n":"last"}']);
    } finally {
      CompressionCodecs[CompressionTypes.ZSTD] = working;
      await consumer.close();
    }
  });
});

describe.skipIf(needs.skipReason)('Kafka source and batches that decompress to too much', () => {
  it('refuses the batches of a fetch beyond its decompression limit as a decode error, and goes on once they fit', async () => {
    // Prepare: three gzip batches of one record of 2 MiB each (a few KB compressed), one fetch response for kafkajs
    const topic = await kit.topic('codec-fetch-limit', 1);
    const producer = createKafkaClient({ brokers }).producer();
    await producer.connect();
    const values = [1, 2, 3].map((n) => JSON.stringify({ n, pad: '0'.repeat(2 * 1024 * 1024) }));
    try {
      for (const value of values) {
        await producer.send({
          topic,
          compression: kafkajs.CompressionTypes.GZIP,
          messages: [{ partition: 0, value }],
        });
      }
    } finally {
      await producer.disconnect();
    }
    const { CompressionCodecs, CompressionTypes } = kafkajs;
    const working = CompressionCodecs[CompressionTypes.GZIP];
    // Each batch fits the batch limit (3 MiB); the three do not fit the fetch limit (5 MiB)
    const limited = kafkaDecompressionCodecs({ batchBytes: 3 * 1024 * 1024, fetchBytes: 5 * 1024 * 1024 });
    CompressionCodecs[CompressionTypes.GZIP] = () => limited.gzip;
    const ingestion = memoryIngestion();
    const errors: Error[] = [];
    const consumer = createKafkaConsumer({
      source: 'events',
      brokers,
      topics: [topic],
      groupId: kit.group('codec-fetch-limit'),
      ingestion,
      retryDelayMs: 200,
      onError: (error: unknown) => errors.push(error as Error),
    });
    try {
      // Act
      await consumer.start();
      const reported = await eventually('a decode error reported', () =>
        errors.find((e) => e.name === 'KafkaFetchDecodeError'),
      );
      const storedMeanwhile = ingestion.messages.length;
      CompressionCodecs[CompressionTypes.GZIP] = working;
      await eventually('the records stored', () => (ingestion.messages.length >= 3 ? true : undefined));
      // Assess: the third batch of the response was refused (kafkajs fails the whole fetch), nothing crashed
      expect(reported.message).toContain(`${topic}/0 at committed offset`);
      expect(reported.message).toMatch(
        /could not decompress a gzip record batch of \d+ bytes: the gzip data decompresses to at least \d+ bytes, over the limit of \d+ bytes, what is left of the 5242880 bytes the batches of one fetch response may decompress to \(\d+ bytes before this batch\)/,
      );
      expect(storedMeanwhile).toBe(0);
      expect(ingestion.messages.map(text)).toEqual(values);
    } finally {
      CompressionCodecs[CompressionTypes.GZIP] = working;
      await consumer.close();
    }
  });
});
