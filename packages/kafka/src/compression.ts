import { promisify } from 'node:util';
import { gzip, unzip } from 'node:zlib';
import { decompress as zstdDecompress } from 'fzstd';
import kafkajs from 'kafkajs';
import lz4 from 'lz4js';
import snappy from 'snappyjs';

// kafkajs is CommonJS and Node's ESM loader does not see these two among its named exports.
const { CompressionCodecs, CompressionTypes } = kafkajs;

const gzipAsync = promisify(gzip);
const unzipAsync = promisify(unzip);

const MiB = 1024 * 1024;

/**
 * The most bytes one compressed record batch may decompress to: 64 MiB, 64 times kafkajs's `maxBytesPerPartition`
 * (1 MiB, which the consumer keeps) and Kafka's default `max.message.bytes` (1 MiB of compressed batch). The sizes
 * a batch declares (snappy's length, xerial block lengths, an LZ4 frame's content size and block sizes, zstd
 * frame content and window sizes and block sizes) are read first, and a batch over the limit is refused before
 * anything is allocated for it: a few bytes declaring gigabytes would otherwise take the process down.
 */
export const MAX_DECOMPRESSED_BATCH_BYTES = 64 * MiB;

/**
 * The most bytes the compressed batches of one fetch response may decompress to in all: 512 MiB, about 50 times
 * kafkajs's `maxBytes` (10 MiB per fetch, which the consumer keeps). Without it, one fetch of many small batches,
 * each under the batch limit, could still exhaust the memory. kafkajs decodes a whole response before any record
 * reaches the consumer; the batches are told apart by the response's memory, which kafkajs hands the codec slices
 * of.
 */
export const MAX_DECOMPRESSED_FETCH_BYTES = 512 * MiB;

/**
 * The largest zstd window accepted: 128 MiB, zstd's own default limit (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 2^27), which
 * Kafka's Java consumer has too. A frame without a content size needs its window allocated while it is decoded.
 */
export const MAX_ZSTD_WINDOW_BYTES = 128 * MiB;

/**
 * A compressed record batch QueueBox could not decompress (corrupt, truncated, in a format the decoder does not
 * know, or larger than the limits when decompressed). kafkajs decodes a whole fetch response before any record
 * reaches the consumer, so this fails the fetch.
 */
export class KafkaBatchDecompressionError extends Error {
  override readonly name = 'KafkaBatchDecompressionError';
  /** `gzip`, `snappy`, `lz4` or `zstd`. */
  readonly codec: string;
  constructor(codec: string, compressedBytes: number, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(`could not decompress a ${codec} record batch of ${compressedBytes} bytes: ${reason}`, { cause });
    this.codec = codec;
  }
}

/**
 * A batch that would decompress to more than it may (see `MAX_DECOMPRESSED_BATCH_BYTES`), found before its output
 * was allocated: `bytes` is what its headers declare or allow (for gzip, where nothing is declared, the limit it
 * ran into).
 */
export class DecompressedSizeLimitError extends Error {
  override readonly name = 'DecompressedSizeLimitError';
  /** What ran into the limit, e.g. `the LZ4 frame declares a content size of`. */
  readonly what: string;
  readonly bytes: number;
  readonly limit: number;
  /** `what`, `bytes` and `limit` make the message; `context` ends it (which limit it is). */
  constructor(what: string, bytes: number, limit: number, context = '') {
    super(`${what} ${bytes} bytes, over the limit of ${limit} bytes${context}`);
    this.what = what;
    this.bytes = bytes;
    this.limit = limit;
  }
}

/**
 * xerial snappy-java's stream framing, which Kafka's Java producer writes (`SnappyOutputStream`): an 8-byte magic
 * `\x82SNAPPY\0`, two 4-byte version fields, then blocks of a 4-byte big-endian length and raw snappy data.
 */
const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER_BYTES = 16;

/** The uncompressed length a raw snappy block starts with (a little-endian base-128 varint of at most 32 bits). */
function snappyLength(block: Uint8Array): number {
  let length = 0;
  for (let i = 0; i < 5 && i < block.length; i++) {
    const byte = block[i] ?? 0;
    length += (byte & 0x7f) * 2 ** (7 * i);
    if (byte < 0x80) return length;
  }
  throw new Error('invalid snappy length');
}

/** One raw snappy block, refused when it declares more than `limit` bytes. */
function rawSnappy(block: Uint8Array, limit: number, what: string): Buffer {
  const declared = snappyLength(block);
  if (declared > limit) throw new DecompressedSizeLimitError(`${what} declares`, declared, limit);
  return toBuffer(snappy.uncompress(block, limit));
}

/**
 * Snappy as Kafka producers write it: xerial-framed (the Java producer) or one raw snappy block (others). At most
 * `limit` bytes out (default `MAX_DECOMPRESSED_BATCH_BYTES`), checked against the declared lengths before each
 * block is decompressed.
 */
export function decompressSnappy(buffer: Buffer, limit = MAX_DECOMPRESSED_BATCH_BYTES): Buffer {
  if (buffer.length < XERIAL_HEADER_BYTES || !buffer.subarray(0, XERIAL_MAGIC.length).equals(XERIAL_MAGIC)) {
    return rawSnappy(buffer, limit, 'the snappy block');
  }
  const blocks: Buffer[] = [];
  let total = 0;
  let at = XERIAL_HEADER_BYTES;
  while (at < buffer.length) {
    if (at + 4 > buffer.length) throw new Error(`truncated xerial block length at byte ${at}`);
    const size = buffer.readUInt32BE(at);
    at += 4;
    if (at + size > buffer.length) {
      throw new Error(`xerial block of ${size} bytes at byte ${at} runs past the end (${buffer.length})`);
    }
    const block = buffer.subarray(at, at + size);
    const declared = snappyLength(block);
    if (total + declared > limit) {
      throw new DecompressedSizeLimitError(
        'the xerial snappy blocks declare at least',
        total + declared,
        limit,
      );
    }
    const out = rawSnappy(block, limit - total, 'the xerial snappy block');
    blocks.push(out);
    total += out.length;
    at += size;
  }
  return Buffer.concat(blocks, total);
}

/** LZ4 frame format constants (lz4_Frame_format.md). */
const LZ4_MAGIC = 0x184d2204;
const LZ4_BLOCK_MAX_SIZES: Readonly<Record<number, number>> = {
  4: 0x10000,
  5: 0x40000,
  6: 0x100000,
  7: 0x400000,
};
/** An LZ4 sequence turns n bytes of input into at most 255 n bytes of output (its length bytes add 255 each). */
const LZ4_MAX_RATIO = 255;

/**
 * What an LZ4 frame can decompress to at most, read from its header and block headers: the sum of its blocks'
 * bounds (a stored block its size; a compressed one the frame's maximum block size, or 255 times its size when
 * less), and the declared content size when the frame has one. Throws for what `lz4js` would misread (another
 * version, a dictionary id, block checksums, a block larger than the maximum) and for a truncated frame.
 */
function lz4FrameBound(buffer: Buffer): { bound: number; contentSize?: number } {
  if (buffer.length < 7 || buffer.readUInt32LE(0) !== LZ4_MAGIC) throw new Error('invalid LZ4 magic number');
  const flags = buffer[4] ?? 0;
  if (flags >> 6 !== 1) throw new Error(`unsupported LZ4 frame version ${flags >> 6}`);
  if (flags & 0x01) throw new Error('LZ4 frames with a dictionary id are not supported');
  // lz4js reads a block checksum before the block's data, not after it: it would decode garbage.
  if (flags & 0x10) throw new Error('LZ4 frames with block checksums are not supported');
  const maxBlock = LZ4_BLOCK_MAX_SIZES[((buffer[5] ?? 0) >> 4) & 7];
  if (maxBlock === undefined) throw new Error('invalid LZ4 block maximum size');
  let at = 6;
  let contentSize: number | undefined;
  if (flags & 0x08) {
    if (at + 8 > buffer.length) throw new Error('truncated LZ4 frame header');
    contentSize = Number(buffer.readBigUInt64LE(at));
    at += 8;
  }
  at += 1; // header checksum
  let bound = 0;
  for (;;) {
    if (at + 4 > buffer.length) throw new Error(`truncated LZ4 frame: no end mark at byte ${at}`);
    const word = buffer.readUInt32LE(at);
    at += 4;
    if (word === 0) break;
    const stored = (word & 0x80000000) !== 0;
    const size = word & 0x7fffffff;
    if (size > maxBlock)
      throw new Error(`LZ4 block of ${size} bytes over the frame's maximum of ${maxBlock}`);
    if (at + size > buffer.length)
      throw new Error(`LZ4 block of ${size} bytes at byte ${at} runs past the end`);
    bound += stored ? size : Math.min(maxBlock, LZ4_MAX_RATIO * size);
    at += size;
  }
  return contentSize === undefined ? { bound } : { bound, contentSize };
}

/**
 * The LZ4 frame format (magic `04 22 4D 18`), which Kafka's producers write since message format v1. At most
 * `limit` bytes out (default `MAX_DECOMPRESSED_BATCH_BYTES`): the frame's declared content size, or the bound its
 * block headers give, is checked before the output is allocated, and the output is never larger than that.
 */
export function decompressLz4(buffer: Buffer, limit = MAX_DECOMPRESSED_BATCH_BYTES): Buffer {
  const { bound, contentSize } = lz4FrameBound(buffer);
  if (contentSize !== undefined && contentSize > limit) {
    throw new DecompressedSizeLimitError('the LZ4 frame declares a content size of', contentSize, limit);
  }
  if (contentSize !== undefined && contentSize > bound) {
    throw new Error(`the LZ4 frame declares ${contentSize} bytes but its blocks hold at most ${bound}`);
  }
  const size = contentSize ?? bound;
  if (size > limit) throw new DecompressedSizeLimitError('the LZ4 frame decompresses to up to', size, limit);
  const out = new Uint8Array(size);
  // lz4js drops writes past the end of `out` but counts them: more than `size` means a corrupt block.
  const written = lz4.decompressFrame(buffer, out);
  if (written > size || (contentSize !== undefined && written !== contentSize)) {
    throw new Error(`the LZ4 frame decompressed to ${written} bytes, not the ${size} its headers allow`);
  }
  return Buffer.from(out.buffer, out.byteOffset, written);
}

const ZSTD_MAGIC = 0xfd2fb528;
/** Zstandard's largest block (Block_Maximum_Size), the most a compressed block decompresses to. */
const ZSTD_BLOCK_MAX = 128 * 1024;

/**
 * What zstd frames can decompress to at most, read from their headers and block headers (RFC 8878): a frame's
 * content size when it declares one, else the sum of its blocks (a raw or RLE block its size, a compressed one at
 * most 128 KiB or the window). Refuses a window over `MAX_ZSTD_WINDOW_BYTES` (allocated while decoding), a frame
 * whose blocks cannot fill its declared size (`fzstd` would pad it with zeros), and a truncated frame.
 */
function zstdBound(buffer: Buffer, limit: number): number {
  let total = 0;
  let at = 0;
  while (at < buffer.length) {
    if (at + 4 > buffer.length) throw new Error(`truncated zstd frame at byte ${at}`);
    const magic = buffer.readUInt32LE(at);
    if (magic >>> 4 === 0x184d2a5) {
      // A skippable frame: 4 bytes of size, then that many bytes nobody decodes.
      if (at + 8 > buffer.length) throw new Error(`truncated skippable frame at byte ${at}`);
      at += 8 + buffer.readUInt32LE(at + 4);
      continue;
    }
    if (magic !== ZSTD_MAGIC) throw new Error(`invalid zstd magic number at byte ${at}`);
    const descriptor = buffer[at + 4] ?? 0;
    if (descriptor & 0x08) throw new Error('reserved bit set in a zstd frame header');
    const singleSegment = (descriptor & 0x20) !== 0;
    const fcsFlag = descriptor >> 6;
    at += 5;
    let window = 0;
    if (!singleSegment) {
      const wd = buffer[at] ?? 0;
      const base = 2 ** (10 + (wd >> 3));
      window = base + (base / 8) * (wd & 7);
      at += 1;
    }
    at += [0, 1, 2, 4][descriptor & 3] ?? 0;
    const fcsBytes = fcsFlag === 0 ? (singleSegment ? 1 : 0) : 2 ** fcsFlag;
    if (at + fcsBytes + 3 > buffer.length) throw new Error('truncated zstd frame header');
    let contentSize: number | undefined;
    if (fcsBytes === 1) contentSize = buffer[at] ?? 0;
    else if (fcsBytes === 2) contentSize = buffer.readUInt16LE(at) + 256;
    else if (fcsBytes === 4) contentSize = buffer.readUInt32LE(at);
    else if (fcsBytes === 8) contentSize = Number(buffer.readBigUInt64LE(at));
    at += fcsBytes;
    if (singleSegment) window = contentSize ?? 0;
    if (contentSize !== undefined && total + contentSize > limit) {
      throw new DecompressedSizeLimitError(
        'the zstd frames declare a content size of',
        total + contentSize,
        limit,
      );
    }
    // fzstd allocates the content size, or the window when the size is unknown (or 0).
    if (!contentSize && window > MAX_ZSTD_WINDOW_BYTES) {
      throw new DecompressedSizeLimitError('the zstd frame needs a window of', window, MAX_ZSTD_WINDOW_BYTES);
    }
    let blocks = 0;
    for (let last = false; !last; ) {
      if (at + 3 > buffer.length) throw new Error(`truncated zstd block header at byte ${at}`);
      const header = buffer.readUIntLE(at, 3);
      at += 3;
      last = (header & 1) === 1;
      const type = (header >> 1) & 3;
      const size = header >>> 3;
      if (type === 3) throw new Error(`reserved zstd block type at byte ${at - 3}`);
      const input = type === 1 ? 1 : size;
      if (at + input > buffer.length)
        throw new Error(`zstd block of ${input} bytes at byte ${at} runs past the end`);
      blocks += type === 2 ? Math.min(ZSTD_BLOCK_MAX, window || ZSTD_BLOCK_MAX) : size;
      at += input;
    }
    if (descriptor & 0x04) at += 4; // content checksum
    if (contentSize !== undefined && contentSize > blocks) {
      throw new Error(`a zstd frame declares ${contentSize} bytes but its blocks hold at most ${blocks}`);
    }
    total += contentSize ?? blocks;
  }
  if (total > limit)
    throw new DecompressedSizeLimitError('the zstd frames decompress to up to', total, limit);
  return total;
}

/**
 * One or more Zstandard frames. At most `limit` bytes out (default `MAX_DECOMPRESSED_BATCH_BYTES`): the frames'
 * declared content sizes, or the bounds their block headers give, are checked before anything is decompressed,
 * and `fzstd` never writes more than those bounds.
 */
export function decompressZstd(buffer: Buffer, limit = MAX_DECOMPRESSED_BATCH_BYTES): Buffer {
  zstdBound(buffer, limit);
  const out = toBuffer(zstdDecompress(buffer));
  if (out.length > limit)
    throw new DecompressedSizeLimitError('the zstd frames decompressed to', out.length, limit);
  return out;
}

/** gzip (kafkajs's own codec reads it without a limit): `zlib` stops at `limit` bytes of output. */
export async function decompressGzip(buffer: Buffer, limit = MAX_DECOMPRESSED_BATCH_BYTES): Promise<Buffer> {
  try {
    return await unzipAsync(buffer, { maxOutputLength: limit });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new DecompressedSizeLimitError('the gzip data decompresses to at least', limit + 1, limit);
    }
    throw error;
  }
}

function toBuffer(bytes: Uint8Array | readonly number[]): Buffer {
  if (Buffer.isBuffer(bytes)) return bytes;
  if (bytes instanceof Uint8Array) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Buffer.from(bytes);
}

/** The limits of `kafkaDecompressionCodecs` (tests use small ones). */
export interface DecompressionLimits {
  /** Default `MAX_DECOMPRESSED_BATCH_BYTES`. */
  readonly batchBytes?: number;
  /** Default `MAX_DECOMPRESSED_FETCH_BYTES`. */
  readonly fetchBytes?: number;
}

/** A kafkajs codec: `compress` takes kafkajs's encoder, `decompress` a compressed batch's records. */
export interface KafkaCodec {
  compress(encoder: { buffer: Buffer }): Promise<Buffer>;
  decompress(buffer: Buffer): Promise<Buffer>;
}

type Decompress = (buffer: Buffer, limit: number) => Buffer | Promise<Buffer>;

/**
 * The codecs `registerKafkaDecompressionCodecs` gives kafkajs, by codec type: gzip (kafkajs's compression, a
 * bounded decompression), and read-only Snappy, LZ4 and ZSTD. Each batch decompresses to at most
 * `limits.batchBytes`, and the batches of one fetch response to at most `limits.fetchBytes` in all (counted by the
 * memory kafkajs hands the codec slices of); a batch over either is a `KafkaBatchDecompressionError`.
 */
export function kafkaDecompressionCodecs(
  limits: DecompressionLimits = {},
): Readonly<Record<'gzip' | 'snappy' | 'lz4' | 'zstd', KafkaCodec>> {
  const batchBytes = limits.batchBytes ?? MAX_DECOMPRESSED_BATCH_BYTES;
  const fetchBytes = limits.fetchBytes ?? MAX_DECOMPRESSED_FETCH_BYTES;
  /** What the batches read so far out of each response decompressed to. */
  const used = new WeakMap<ArrayBufferLike, number>();
  const codec = (name: string, decompress: Decompress, compress = noCompression(name)): KafkaCodec => ({
    compress,
    async decompress(buffer: Buffer): Promise<Buffer> {
      const response = buffer.buffer;
      const before = used.get(response) ?? 0;
      const limit = Math.max(0, Math.min(batchBytes, fetchBytes - before));
      try {
        const out = await decompress(buffer, limit);
        used.set(response, (used.get(response) ?? 0) + out.length);
        return out;
      } catch (error) {
        // Say which limit it was: the batch's own, or what the batches before it in the response left.
        const cause =
          error instanceof DecompressedSizeLimitError && error.limit === limit
            ? new DecompressedSizeLimitError(
                error.what,
                error.bytes,
                error.limit,
                limit < batchBytes
                  ? `, what is left of the ${fetchBytes} bytes the batches of one fetch response may decompress to (${before} bytes before this batch)`
                  : ' per batch',
              )
            : error;
        throw new KafkaBatchDecompressionError(name, buffer.length, cause);
      }
    },
  });
  return {
    // Compressing as kafkajs's own gzip codec does.
    gzip: codec('gzip', decompressGzip, (encoder) => gzipAsync(encoder.buffer)),
    snappy: codec('snappy', decompressSnappy),
    lz4: codec('lz4', decompressLz4),
    zstd: codec('zstd', decompressZstd),
  };
}

function noCompression(codec: string): KafkaCodec['compress'] {
  return async () => {
    throw new Error(
      `QueueBox decompresses ${codec} record batches but does not produce them: send without compression or with gzip`,
    );
  };
}

let registered = false;

/**
 * Teaches kafkajs (process-wide: its codec table is global) to read Snappy, LZ4 and ZSTD record batches with
 * pure-JavaScript decoders (`snappyjs`, `lz4js`, `fzstd`), and bounds what every compressed batch, gzip included,
 * may decompress to (`MAX_DECOMPRESSED_BATCH_BYTES` per batch, `MAX_DECOMPRESSED_FETCH_BYTES` per fetch
 * response). kafkajs alone reads only gzip, without a limit, and fails the whole fetch on any other codec, so a
 * partition holding one batch of a Java producer with `compression.type=zstd` would never be consumed. Compressing
 * with Snappy, LZ4 or ZSTD stays unsupported (a clear error); gzip compresses as kafkajs does. Safe to call more
 * than once.
 */
export function registerKafkaDecompressionCodecs(): void {
  if (registered) return;
  registered = true;
  const codecs = kafkaDecompressionCodecs();
  CompressionCodecs[CompressionTypes.GZIP] = () => codecs.gzip;
  CompressionCodecs[CompressionTypes.Snappy] = () => codecs.snappy;
  CompressionCodecs[CompressionTypes.LZ4] = () => codecs.lz4;
  CompressionCodecs[CompressionTypes.ZSTD] = () => codecs.zstd;
}
