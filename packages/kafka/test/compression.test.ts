import { gzipSync } from 'node:zlib';
import kafkajs from 'kafkajs';
import lz4 from 'lz4js';
import snappy from 'snappyjs';
import { describe, expect, it } from 'vitest';
import {
  DecompressedSizeLimitError,
  decompressGzip,
  decompressLz4,
  decompressSnappy,
  decompressZstd,
  isKafkaFetchDecodeError,
  KafkaBatchDecompressionError,
  KafkaFetchDecodeError,
  kafkaDecompressionCodecs,
  MAX_DECOMPRESSED_BATCH_BYTES,
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

const MiB = 1024 * 1024;

/** A buffer of its own (not a slice of Node's shared pool), as a fetch response is. */
function own(...parts: readonly Uint8Array[]): Buffer {
  const out = Buffer.alloc(parts.reduce((sum, p) => sum + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * A valid zstd frame of RLE blocks (each `blockBytes` copies of `byte`) without a content size and with a 128 KiB
 * window, as a streaming compressor writes it: a few bytes per 128 KiB of output.
 */
function zstdRleFrame(blocks: number, blockBytes = 128 * 1024, byte = 0x61): Buffer {
  const parts = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3])];
  for (let i = 0; i < blocks; i++) {
    const header = Buffer.alloc(3);
    header.writeUIntLE((blockBytes << 3) | (1 << 1) | (i === blocks - 1 ? 1 : 0), 0, 3);
    parts.push(header, Buffer.from([byte]));
  }
  return own(...parts);
}

/**
 * A valid LZ4 frame (4 MiB maximum blocks; the content size in its header when asked) of compressed blocks, each
 * one literal `a` and one match repeating it to `blockBytes` bytes: about `blockBytes / 255` bytes per block.
 */
function lz4MatchFrame(blocks: number, blockBytes: number, withContentSize = false): Buffer {
  const matchExtra = blockBytes - 1 - 19;
  const ext = Math.floor(matchExtra / 255);
  const block = Buffer.concat([
    Buffer.from([0x1f, 0x61, 0x01, 0x00]),
    Buffer.alloc(ext, 0xff),
    Buffer.from([matchExtra - 255 * ext]),
  ]);
  const size = Buffer.alloc(4);
  size.writeUInt32LE(block.length);
  const contentSize = Buffer.alloc(8);
  contentSize.writeBigUInt64LE(BigInt(blocks * blockBytes));
  const parts = withContentSize
    ? [Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x48, 0x70]), contentSize, Buffer.from([0x00])]
    : [Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x40, 0x70, 0x00])];
  for (let i = 0; i < blocks; i++) parts.push(size, block);
  return own(...parts, Buffer.alloc(4));
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

describe('Kafka record batch decompression limits', () => {
  /** Forged headers: a few bytes that declare gigabytes (each would allocate them before the fix). */
  const snappyBomb = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x07]);
  const lz4ContentSizeBomb = (() => {
    const frame = Buffer.alloc(19);
    frame.writeUInt32LE(0x184d2204, 0);
    frame[4] = 0x40 | 0x08;
    frame[5] = 0x70;
    frame.writeBigUInt64LE(0x7fffffffn, 6);
    return frame;
  })();
  /** Single segment, an 8-byte content size of 2e9, one empty raw block. */
  const zstdContentSizeBomb = (() => {
    const frame = Buffer.alloc(4 + 1 + 8 + 3);
    frame.writeUInt32LE(0xfd2fb528, 0);
    frame[4] = 0xe0;
    frame.writeBigUInt64LE(2_000_000_000n, 5);
    frame.writeUIntLE(1, 13, 3);
    return frame;
  })();
  /** No content size and a window of 1.875 GiB (2^30 + 7 × 2^27), one empty raw block. */
  const zstdWindowBomb = own(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (20 << 3) | 7, 0x01, 0x00, 0x00]));

  it.each([
    [
      'a raw snappy block declaring 2 GiB',
      () => decompressSnappy(snappyBomb),
      /snappy block declares 2147483647 bytes/,
    ],
    [
      'an LZ4 frame declaring a 2 GiB content size',
      () => decompressLz4(lz4ContentSizeBomb),
      /LZ4 frame declares a content size of 2147483647 bytes/,
    ],
    [
      'an LZ4 frame of 80 blocks of 1 MiB (80 MiB from 330 KB)',
      () => decompressLz4(lz4MatchFrame(80, MiB)),
      // Each block's bound: 255 times its 4116 bytes
      /LZ4 frame decompresses to up to 83966400 bytes/,
    ],
    [
      'a zstd frame of 2400 RLE blocks (300 MiB from 9.6 KB)',
      () => decompressZstd(zstdRleFrame(2400)),
      /zstd frames decompress to up to 314572800 bytes/,
    ],
    [
      'a zstd frame declaring a 2 GB content size',
      () => decompressZstd(zstdContentSizeBomb),
      /zstd frames declare a content size of 2000000000 bytes/,
    ],
    [
      'a zstd frame asking for a 1.875 GiB window',
      () => decompressZstd(zstdWindowBomb),
      /zstd frame needs a window of 2013265920 bytes, over the limit of 134217728/,
    ],
  ] as const)('refuses %s before allocating it', (_what, decompress, message) => {
    // Prepare
    const before = process.memoryUsage().arrayBuffers;
    // Act
    let error: unknown;
    try {
      decompress();
    } catch (thrown) {
      error = thrown;
    }
    // Assess
    expect(error).toBeInstanceOf(DecompressedSizeLimitError);
    expect(String(error)).toMatch(message);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 * MiB);
  });

  it('reads batches up to the limit and refuses one byte more, for every codec', async () => {
    // Prepare
    const data = Buffer.alloc(5000, 0x61);
    const zstdFrame = zstdRleFrame(5, 1000);
    const lz4Frame = lz4MatchFrame(5, 1000, true);
    const snappyRaw = Buffer.from(snappy.compress(data));
    const snappyFramed = xerial([data.subarray(0, 2500), data.subarray(2500)]);
    const gzip = gzipSync(data);
    // Act
    const read = [
      decompressZstd(zstdFrame, 5000),
      decompressLz4(lz4Frame, 5000),
      decompressSnappy(snappyRaw, 5000),
      decompressSnappy(snappyFramed, 5000),
      await decompressGzip(gzip, 5000),
    ];
    const refused = [
      () => decompressZstd(zstdFrame, 4999),
      () => decompressLz4(lz4Frame, 4999),
      () => decompressSnappy(snappyRaw, 4999),
      () => decompressSnappy(snappyFramed, 4999),
    ].map((decompress) => {
      try {
        decompress();
        return undefined;
      } catch (error) {
        return error;
      }
    });
    const gzipRefused = await decompressGzip(gzip, 4999).catch((error: unknown) => error);
    // Assess
    for (const out of read) expect(out.equals(data)).toBe(true);
    for (const error of [...refused, gzipRefused]) expect(error).toBeInstanceOf(DecompressedSizeLimitError);
    expect(String(refused[3])).toMatch(
      /xerial snappy blocks declare at least 5000 bytes, over the limit of 4999/,
    );
    expect(String(gzipRefused)).toMatch(
      /gzip data decompresses to at least 5000 bytes, over the limit of 4999/,
    );
  });

  it('refuses a frame that does not hold the size it declares', () => {
    // Prepare: one RLE block of 1000 bytes in a zstd frame declaring 1 MiB (fzstd would pad it with zeros), and
    // an LZ4 frame of 5000 bytes declaring 4000 (lz4js would cut it short)
    const rleBlock = Buffer.alloc(3);
    rleBlock.writeUIntLE((1000 << 3) | (1 << 1) | 1, 0, 3);
    const zstdFrame = own(
      Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0]),
      Buffer.from(Uint32Array.of(MiB).buffer),
      rleBlock,
      Buffer.from([0x61]),
    );
    const lz4Frame = lz4MatchFrame(5, 1000, true);
    lz4Frame.writeBigUInt64LE(4000n, 6);
    // Act + Assess
    expect(() => decompressZstd(zstdFrame)).toThrow(
      /declares 1048576 bytes but its blocks hold at most 1000/,
    );
    expect(() => decompressLz4(lz4Frame)).toThrow(/LZ4 frame decompressed to 5000 bytes, not the 4000/);
  });

  it('reports a batch over the limit as a decode error of the fetch, naming the limit', async () => {
    // Prepare
    registerKafkaDecompressionCodecs();
    const { CompressionCodecs, CompressionTypes } = kafkajs;
    // Act
    const errors = await Promise.all(
      [
        [CompressionTypes.Snappy, snappyBomb],
        [CompressionTypes.LZ4, lz4ContentSizeBomb],
        [CompressionTypes.ZSTD, zstdRleFrame(2400)],
        [CompressionTypes.GZIP, gzipSync(Buffer.alloc(MAX_DECOMPRESSED_BATCH_BYTES + 1))],
      ].map(([type, batch]) =>
        CompressionCodecs[type as kafkajs.CompressionTypes.GZIP]()
          .decompress(batch)
          .catch((error: unknown) => error),
      ),
    );
    // Assess
    for (const error of errors) {
      expect(error).toBeInstanceOf(KafkaBatchDecompressionError);
      expect(isKafkaFetchDecodeError(error)).toBe(true);
      expect(String(error)).toMatch(/over the limit of 67108864 bytes per batch$/);
    }
    expect(String(errors[2])).toMatch(
      /could not decompress a zstd record batch of 9606 bytes: the zstd frames decompress to up to 314572800 bytes/,
    );
    // gzip still compresses, as kafkajs does
    const compressed = await CompressionCodecs[CompressionTypes.GZIP]().compress({
      buffer: Buffer.from('x'),
    });
    expect(await decompressGzip(compressed)).toEqual(Buffer.from('x'));
  });

  it('bounds what the batches of one fetch response decompress to in all', async () => {
    // Prepare: a response holding three batches of 2000 bytes each, within a batch limit of 3000 and a fetch limit of 5000
    const codecs = kafkaDecompressionCodecs({ batchBytes: 3000, fetchBytes: 5000 });
    const batch = zstdRleFrame(2, 1000);
    const response = own(batch, batch, batch);
    const slices = [0, 1, 2].map((i) => response.subarray(i * batch.length, (i + 1) * batch.length));
    // Act
    const first = await codecs.zstd.decompress(slices[0] as Buffer);
    const second = await codecs.zstd.decompress(slices[1] as Buffer);
    const third = await codecs.zstd.decompress(slices[2] as Buffer).catch((error: unknown) => error);
    const elsewhere = await codecs.zstd.decompress(own(batch));
    // Assess
    expect([first.length, second.length, elsewhere.length]).toEqual([2000, 2000, 2000]);
    expect(third).toBeInstanceOf(KafkaBatchDecompressionError);
    expect(String(third)).toMatch(
      /the zstd frames decompress to up to 2000 bytes, over the limit of 1000 bytes, what is left of the 5000 bytes the batches of one fetch response may decompress to \(4000 bytes before this batch\)/,
    );
  });
});
