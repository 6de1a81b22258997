import { decompress as zstdDecompress } from 'fzstd';
import kafkajs from 'kafkajs';
import lz4 from 'lz4js';
import snappy from 'snappyjs';

// kafkajs is CommonJS and Node's ESM loader does not see these two among its named exports.
const { CompressionCodecs, CompressionTypes } = kafkajs;

/** The codec names of Kafka's record-batch attributes (the lowest three bits), as Kafka's tools spell them. */
const CODEC_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;

/**
 * A compressed record batch QueueBox could not decompress (corrupt, truncated or in a format the decoder does not
 * know). kafkajs decodes a whole fetch response before any record reaches the consumer, so this fails the fetch.
 */
export class KafkaBatchDecompressionError extends Error {
  override readonly name = 'KafkaBatchDecompressionError';
  /** `snappy`, `lz4` or `zstd`. */
  readonly codec: string;
  constructor(codec: string, compressedBytes: number, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(`could not decompress a ${codec} record batch of ${compressedBytes} bytes: ${reason}`, { cause });
    this.codec = codec;
  }
}

/**
 * xerial snappy-java's stream framing, which Kafka's Java producer writes (`SnappyOutputStream`): an 8-byte magic
 * `\x82SNAPPY\0`, two 4-byte version fields, then blocks of a 4-byte big-endian length and raw snappy data.
 */
const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER_BYTES = 16;

/** Snappy as Kafka producers write it: xerial-framed (the Java producer) or one raw snappy block (others). */
export function decompressSnappy(buffer: Buffer): Buffer {
  if (buffer.length < XERIAL_HEADER_BYTES || !buffer.subarray(0, XERIAL_MAGIC.length).equals(XERIAL_MAGIC)) {
    return toBuffer(snappy.uncompress(buffer));
  }
  const blocks: Buffer[] = [];
  let at = XERIAL_HEADER_BYTES;
  while (at < buffer.length) {
    if (at + 4 > buffer.length) throw new Error(`truncated xerial block length at byte ${at}`);
    const size = buffer.readUInt32BE(at);
    at += 4;
    if (at + size > buffer.length) {
      throw new Error(`xerial block of ${size} bytes at byte ${at} runs past the end (${buffer.length})`);
    }
    blocks.push(toBuffer(snappy.uncompress(buffer.subarray(at, at + size))));
    at += size;
  }
  return Buffer.concat(blocks);
}

/** The LZ4 frame format (magic `04 22 4D 18`), which Kafka's producers write since message format v1. */
export function decompressLz4(buffer: Buffer): Buffer {
  return toBuffer(lz4.decompress(buffer));
}

/** One or more Zstandard frames. */
export function decompressZstd(buffer: Buffer): Buffer {
  return toBuffer(zstdDecompress(buffer));
}

function toBuffer(bytes: Uint8Array | readonly number[]): Buffer {
  if (Buffer.isBuffer(bytes)) return bytes;
  if (bytes instanceof Uint8Array) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Buffer.from(bytes);
}

function readOnlyCodec(type: kafkajs.CompressionTypes, decompress: (buffer: Buffer) => Buffer) {
  const codec = CODEC_NAMES[type] ?? String(type);
  return {
    async compress(): Promise<Buffer> {
      throw new Error(
        `QueueBox decompresses ${codec} record batches but does not produce them: send without compression or with gzip`,
      );
    },
    async decompress(buffer: Buffer): Promise<Buffer> {
      try {
        return decompress(buffer);
      } catch (error) {
        throw new KafkaBatchDecompressionError(codec, buffer.length, error);
      }
    },
  };
}

let registered = false;

/**
 * Teaches kafkajs (process-wide: its codec table is global) to read Snappy, LZ4 and ZSTD record batches with
 * pure-JavaScript decoders (`snappyjs`, `lz4js`, `fzstd`). kafkajs alone reads only gzip and fails the whole fetch
 * on any other codec, so a partition holding one batch of a Java producer with `compression.type=zstd` would never
 * be consumed. Compressing with them stays unsupported (a clear error). Safe to call more than once.
 */
export function registerKafkaDecompressionCodecs(): void {
  if (registered) return;
  registered = true;
  const snappyCodec = readOnlyCodec(CompressionTypes.Snappy, decompressSnappy);
  const lz4Codec = readOnlyCodec(CompressionTypes.LZ4, decompressLz4);
  const zstdCodec = readOnlyCodec(CompressionTypes.ZSTD, decompressZstd);
  CompressionCodecs[CompressionTypes.Snappy] = () => snappyCodec;
  CompressionCodecs[CompressionTypes.LZ4] = () => lz4Codec;
  CompressionCodecs[CompressionTypes.ZSTD] = () => zstdCodec;
}
