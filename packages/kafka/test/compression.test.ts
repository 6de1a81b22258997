import kafkajs from 'kafkajs';
import lz4 from 'lz4js';
import snappy from 'snappyjs';
import { describe, expect, it } from 'vitest';
import {
  decompressLz4,
  decompressSnappy,
  decompressZstd,
  isKafkaFetchDecodeError,
  KafkaBatchDecompressionError,
  KafkaFetchDecodeError,
  registerKafkaDecompressionCodecs,
} from '../src/index.ts';

/**
 * The records section of one-record batches that Kafka 4.1's Java producer (`kafka.tools.ConsoleProducer
 * --compression-codec …`) wrote for the value `{"n":"<codec>-compressed"}`, cut from the broker's log segment.
 */
const JAVA_BATCHES = {
  zstd: 'KLUv/QBY8AAAOgAAAAEueyJuIjoienN0ZC1jb21wcmVzc2VkIn0AAQAA',
  lz4: 'BCJNGGBAgh0AAIA4AAAAASx7Im4iOiJsejQtY29tcHJlc3NlZCJ9AAAAAAA=',
  snappy: 'glNOQVBQWQAAAAABAAAAAQAAACIgfD4AAAABMnsibiI6InNuYXBweS1jb21wcmVzc2VkIn0A',
} as const;

const decoders = { zstd: decompressZstd, lz4: decompressLz4, snappy: decompressSnappy } as const;

/** xerial snappy-java's stream: magic, version 1, compatible 1, then length-prefixed raw snappy blocks. */
function xerial(blocks: readonly Buffer[]): Buffer {
  const header = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00, 0, 0, 0, 1, 0, 0, 0, 1]);
  const parts = [header];
  for (const block of blocks) {
    const compressed = Buffer.from(snappy.compress(block));
    const length = Buffer.alloc(4);
    length.writeUInt32BE(compressed.length);
    parts.push(length, compressed);
  }
  return Buffer.concat(parts);
}

describe('Kafka record batch decompression', () => {
  it.each(Object.keys(JAVA_BATCHES) as (keyof typeof JAVA_BATCHES)[])(
    'reads the records of a %s batch of the Java producer',
    (codec) => {
      // Act
      const records = decoders[codec](Buffer.from(JAVA_BATCHES[codec], 'base64'));
      // Assess: one record (length varint, attributes, deltas, key -1, value), the value intact
      expect(Buffer.isBuffer(records)).toBe(true);
      expect(records.toString('latin1')).toContain(`{"n":"${codec}-compressed"}`);
    },
  );

  it('reads xerial-framed snappy of several blocks, and raw snappy', () => {
    // Prepare: blocks of 32 KiB as snappy-java writes them
    const data = Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 7919) % 251));
    const blocks = [data.subarray(0, 32768), data.subarray(32768, 65536), data.subarray(65536)];
    // Act
    const framed = decompressSnappy(xerial(blocks));
    const raw = decompressSnappy(Buffer.from(snappy.compress(data)));
    // Assess
    expect(framed.equals(data)).toBe(true);
    expect(raw.equals(data)).toBe(true);
  });

  it('reads an LZ4 frame of several blocks', () => {
    // Prepare
    const data = Buffer.from(`${'abc'.repeat(60_000)}${'xyz'.repeat(30_000)}`);
    // Act
    const out = decompressLz4(Buffer.from(lz4.compress(data)));
    // Assess
    expect(out.equals(data)).toBe(true);
  });

  it('registers codecs that name the codec when a batch is corrupt and refuse to compress', async () => {
    // Prepare
    registerKafkaDecompressionCodecs();
    const { CompressionCodecs, CompressionTypes } = kafkajs;
    const truncated = Buffer.from(JAVA_BATCHES.zstd, 'base64').subarray(0, 12);
    const framedBadly = xerial([Buffer.from('hello')]).subarray(0, 20);
    // Act
    const zstd = CompressionCodecs[CompressionTypes.ZSTD]();
    const snappyCodec = CompressionCodecs[CompressionTypes.Snappy]();
    const zstdError = await zstd.decompress(truncated).catch((error: unknown) => error);
    const snappyError = await snappyCodec.decompress(framedBadly).catch((error: unknown) => error);
    const compressError = await zstd.compress({ buffer: Buffer.from('x') }).catch((error: unknown) => error);
    // Assess
    expect(zstdError).toBeInstanceOf(KafkaBatchDecompressionError);
    expect(String(zstdError)).toMatch(/could not decompress a zstd record batch of 12 bytes: /);
    expect(String(snappyError)).toMatch(
      /could not decompress a snappy record batch of 20 bytes: .*runs past/,
    );
    expect(String(compressError)).toMatch(/does not produce them: send without compression or with gzip/);
    expect(isKafkaFetchDecodeError(zstdError)).toBe(true);
    expect(isKafkaFetchDecodeError(new Error('Connection error'))).toBe(false);
  });

  it('says which partitions and offsets a fetch that could not be decoded concerns', () => {
    // Act
    const error = new KafkaFetchDecodeError(
      [
        { topic: 'orders', partition: 0, committedOffset: '41' },
        { topic: 'orders', partition: 1 },
      ],
      new KafkaBatchDecompressionError('lz4', 99, new Error('invalid magic number')),
    );
    // Assess
    expect(error.message).toMatch(
      /orders\/0 at committed offset 41, orders\/1 at committed offset unknown\): could not decompress a lz4 record batch of 99 bytes: invalid magic number/,
    );
  });
});
