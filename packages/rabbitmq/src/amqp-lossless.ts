import { isDeepStrictEqual } from 'node:util';
import { BASE64_HEADER_PREFIX, QueueBoxError } from '@queuebox/core';

/**
 * Lossless decoding of AMQP content headers (`basic` properties) on the consumer's connections.
 *
 * amqplib decodes every shortstr (message-id, type, correlation-id, a header's name) and longstr (a header's value)
 * with `Buffer#toString('utf8')`, which replaces bytes that are not UTF-8 with U+FFFD, and every int64 header value
 * (`l`) and timestamp (`T`) as a Number, which rounds past 2^53. RabbitMQ passes any bytes in those strings, so two
 * message-ids that differ only in such bytes (a binary id, Latin-1 text: `caf\xE9` / `caf\xE8`) became one
 * idempotency key, and the second message was acknowledged as a duplicate and lost (outside encodings audit).
 *
 * amqplib keeps its decoders private to its modules (its package exports only its API), and its frame module reads
 * `defs.decode` once at load, so nothing of amqplib's is patched: each connection of ours gets an own `recvFrame`
 * (the method amqplib's read loop calls on the connection for every frame) that decodes a complete content header
 * frame itself, with the same fields and value shapes as amqplib except that
 *
 * - a shortstr or longstr whose bytes are not UTF-8 is `base64:` + the standard base64 of its bytes (core's
 *   `BASE64_HEADER_PREFIX`, the rule of Kafka and NATS header bytes); valid UTF-8 is the same text amqplib gives
 *   (a byte-order mark, U+0000 or a U+FFFD that was sent as such included);
 * - an int64 (`l`) or timestamp (`T`) outside Number's safe integers is a BigInt (the header's text is its exact
 *   decimal); inside, a Number as before;
 * - a table's `__proto__` key is an own property, not the table's prototype.
 *
 * Every other frame (and a header frame not complete yet, or one amqplib refuses) goes to amqplib's own `recvFrame`.
 * Before it is installed on a connection, amqplib's `recvFrame` and ours decode the same synthetic frame (every
 * property, every field type, valid UTF-8, safe integers) and must give the same result: an amqplib whose internals
 * changed shape is left as it is, and the install reports why (`LosslessDecodingUnavailableError`).
 */

/** The mark on a properties object this module decoded (its strings and int64 values are exact). */
const LOSSLESS = Symbol('queuebox.amqp.lossless-properties');

/** Whether `properties` (a delivery's) were decoded by this module, not by amqplib's lossy decoder. */
export function isLosslessProperties(properties: unknown): boolean {
  return typeof properties === 'object' && properties !== null && Object.hasOwn(properties, LOSSLESS);
}

/** amqplib's internals are not the shape this module relies on: its own decoder stays in use on the connection. */
export class LosslessDecodingUnavailableError extends QueueBoxError {}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The text of `bytes`: UTF-8 as it is (as `toString('utf8')` gives it), else `base64:` + their base64. */
export function amqpStringText(bytes: Buffer): string {
  try {
    return utf8.decode(bytes);
  } catch {
    return `${BASE64_HEADER_PREFIX}${bytes.toString('base64')}`;
  }
}

const text = (buffer: Buffer, start: number, end: number) => amqpStringText(buffer.subarray(start, end));

/** An int64 as a Number when it is a safe integer, else as a BigInt (exact). */
const exact = (value: bigint): number | bigint => {
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : value;
};

/** Sets an own, enumerable property (a `__proto__` key included), the last of repeated keys winning. */
function put(table: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(table, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A table or array being decoded: its bytes (a table's own slice, an array shares its parent's), the position. */
interface Open {
  readonly buffer: Buffer;
  position: number;
  readonly until: number;
  readonly into: Record<string, unknown> | unknown[];
  /** An array's parent: it goes on where the array ended. */
  readonly parent?: Open;
}

/**
 * A field table (`slice`: its bytes, without the length), decoded as amqplib's `codec.decodeFields` does, with the
 * differences above, and without recursion (a table nested thousands of levels deep must not overflow the stack).
 */
export function decodeTable(slice: Buffer): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  const stack: Open[] = [{ buffer: slice, position: 0, until: slice.length, into: root }];
  for (let top = stack.at(-1); top !== undefined; top = stack.at(-1)) {
    if (top.position >= top.until) {
      stack.pop();
      if (top.parent !== undefined) top.parent.position = top.position;
      continue;
    }
    const { buffer } = top;
    let offset = top.position;
    let key: string | undefined;
    if (!Array.isArray(top.into)) {
      const length = buffer.readUInt8(offset);
      offset++;
      key = text(buffer, offset, offset + length);
      offset += length;
    }
    const store = (value: unknown) => {
      if (Array.isArray(top.into)) top.into.push(value);
      else put(top.into, key as string, value);
    };
    const tag = String.fromCharCode(buffer[offset] as number);
    offset++;
    let value: unknown;
    let length: number;
    switch (tag) {
      case 'b':
        value = buffer.readInt8(offset);
        offset++;
        break;
      case 'B':
        value = buffer.readUInt8(offset);
        offset++;
        break;
      case 'S':
        length = buffer.readUInt32BE(offset);
        offset += 4;
        value = text(buffer, offset, offset + length);
        offset += length;
        break;
      case 'I':
        value = buffer.readInt32BE(offset);
        offset += 4;
        break;
      case 'i':
        value = buffer.readUInt32BE(offset);
        offset += 4;
        break;
      case 'D': {
        const places = buffer[offset];
        offset++;
        const digits = buffer.readUInt32BE(offset);
        offset += 4;
        value = { '!': 'decimal', value: { places, digits } };
        break;
      }
      case 'T':
        value = { '!': 'timestamp', value: exact(buffer.readBigUInt64BE(offset)) };
        offset += 8;
        break;
      case 'F': {
        length = buffer.readUInt32BE(offset);
        offset += 4;
        const table: Record<string, unknown> = {};
        store(table);
        const own = buffer.subarray(offset, offset + length);
        offset += length;
        top.position = offset;
        stack.push({ buffer: own, position: 0, until: own.length, into: table });
        continue;
      }
      case 'A': {
        length = buffer.readUInt32BE(offset);
        offset += 4;
        const array: unknown[] = [];
        store(array);
        top.position = offset;
        stack.push({ buffer, position: offset, until: offset + length, into: array, parent: top });
        continue;
      }
      case 'd':
        value = buffer.readDoubleBE(offset);
        offset += 8;
        break;
      case 'f':
        value = buffer.readFloatBE(offset);
        offset += 4;
        break;
      case 'l':
        value = exact(buffer.readBigInt64BE(offset));
        offset += 8;
        break;
      case 's':
        value = buffer.readInt16BE(offset);
        offset += 2;
        break;
      case 'u':
        value = buffer.readUInt16BE(offset);
        offset += 2;
        break;
      case 't':
        value = buffer[offset] !== 0;
        offset++;
        break;
      case 'V':
        value = null;
        break;
      case 'x':
        length = buffer.readUInt32BE(offset);
        offset += 4;
        value = buffer.subarray(offset, offset + length);
        offset += length;
        break;
      default:
        throw new TypeError(`Unexpected type tag "${tag}"`);
    }
    store(value);
    top.position = offset;
  }
  return root;
}

/** The `basic` properties in the order of their flag bits (15 down to 2), as amqplib names them. */
const PROPERTIES = [
  ['contentType', 'shortstr'],
  ['contentEncoding', 'shortstr'],
  ['headers', 'table'],
  ['deliveryMode', 'octet'],
  ['priority', 'octet'],
  ['correlationId', 'shortstr'],
  ['replyTo', 'shortstr'],
  ['expiration', 'shortstr'],
  ['messageId', 'shortstr'],
  ['timestamp', 'timestamp'],
  ['type', 'shortstr'],
  ['userId', 'shortstr'],
  ['appId', 'shortstr'],
  ['clusterId', 'shortstr'],
] as const;

/**
 * The `basic` properties of a content header frame (`buffer`: the property flags and the fields), as amqplib's
 * `decodeBasicProperties` gives them, with the differences above; marked as decoded here.
 */
export function decodeBasicProperties(buffer: Buffer): Record<string, unknown> {
  const flags = buffer.readUInt16BE(0);
  const fields: Record<string, unknown> = {};
  Object.defineProperty(fields, LOSSLESS, { value: true });
  if (flags === 0) return fields;
  for (const [name] of PROPERTIES) fields[name] = undefined;
  let offset = 2;
  PROPERTIES.forEach(([name, kind], index) => {
    if ((flags & (0x8000 >> index)) === 0) return;
    switch (kind) {
      case 'shortstr': {
        const length = buffer.readUInt8(offset);
        offset++;
        fields[name] = text(buffer, offset, offset + length);
        offset += length;
        return;
      }
      case 'table': {
        const length = buffer.readUInt32BE(offset);
        offset += 4;
        fields[name] = decodeTable(buffer.subarray(offset, offset + length));
        offset += length;
        return;
      }
      case 'octet':
        fields[name] = buffer[offset];
        offset++;
        return;
      case 'timestamp':
        // As amqplib: a property QueueBox does not read.
        fields[name] = Number(buffer.readBigUInt64BE(offset));
        offset += 8;
        return;
    }
  });
  return fields;
}

const FRAME_HEADER = 2;
const FRAME_END = 206;
/** type (1) + channel (2) + size (4). */
const FRAME_PREFIX = 7;
/** The class id of `basic` (its content header carries the BasicProperties). */
const BASIC_CLASS = 60;

/** What of amqplib's connection (lib/connection.js) the lossless `recvFrame` reads and sets. */
interface FrameReader {
  rest: Buffer;
  readonly maxFrameSize?: number;
  recvFrame(): unknown;
}

/**
 * A `recvFrame` that decodes a complete `basic` content header frame at the head of `this.rest` (see the module's
 * comment) and leaves everything else to `original` (amqplib's: it parses, reads the socket, throws on a bad frame).
 */
function losslessRecvFrame(original: () => unknown): (this: FrameReader) => unknown {
  return function recvFrame(this: FrameReader) {
    const rest = this.rest;
    if (Buffer.isBuffer(rest) && rest.length >= FRAME_PREFIX && rest[0] === FRAME_HEADER) {
      const size = rest.readUInt32BE(3);
      const max = this.maxFrameSize ?? 0;
      const total = FRAME_PREFIX + size + 1;
      if (
        !(max > 0 && size > max) &&
        size >= 14 &&
        rest.length >= total &&
        rest[FRAME_PREFIX + size] === FRAME_END &&
        rest.readUInt16BE(FRAME_PREFIX) === BASIC_CLASS
      ) {
        const payload = rest.subarray(FRAME_PREFIX, FRAME_PREFIX + size);
        const frame = {
          id: BASIC_CLASS,
          channel: rest.readUInt16BE(1),
          size: Number(payload.readBigInt64BE(4)),
          fields: decodeBasicProperties(payload.subarray(12)),
        };
        this.rest = rest.subarray(total);
        return frame;
      }
    }
    return original.call(this);
  };
}

/** Encoding helpers for the synthetic frame of the shape check. */
const shortstr = (s: string) => {
  const bytes = Buffer.from(s);
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
};
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const withLength = (bytes: Buffer) => Buffer.concat([u32(bytes.length), bytes]);

/**
 * A content header frame with every property set and every field type amqplib decodes, in valid UTF-8 and safe
 * integers, on which amqplib and this module must agree.
 */
function probeFrame(): Buffer {
  const i64 = (n: bigint) => {
    const b = Buffer.alloc(8);
    b.writeBigInt64BE(n);
    return b;
  };
  const num = (tag: string, write: (b: Buffer) => void, size: number) => {
    const b = Buffer.alloc(size);
    write(b);
    return Buffer.concat([Buffer.from(tag), b]);
  };
  const inner = Buffer.concat([shortstr('k'), Buffer.from('S'), withLength(Buffer.from('v\u00e9'))]);
  const array = Buffer.concat([
    num('b', (b) => b.writeInt8(-5), 1),
    Buffer.from('S'),
    withLength(Buffer.from('two')),
    Buffer.from('A'),
    withLength(Buffer.concat([num('s', (b) => b.writeInt16BE(-300), 2)])),
    Buffer.from('F'),
    withLength(inner),
  ]);
  const table = Buffer.concat([
    shortstr('b'),
    num('b', (b) => b.writeInt8(-1), 1),
    shortstr('B'),
    num('B', (b) => b.writeUInt8(200), 1),
    shortstr('s\u00fc'),
    Buffer.from('S'),
    withLength(Buffer.from('\ufeffl\u00e4ng \uFFFD \u0000')),
    shortstr('I'),
    num('I', (b) => b.writeInt32BE(-70000), 4),
    shortstr('i'),
    num('i', (b) => b.writeUInt32BE(4000000000), 4),
    shortstr('D'),
    Buffer.concat([Buffer.from('D'), Buffer.from([2]), u32(12345)]),
    shortstr('T'),
    Buffer.concat([Buffer.from('T'), i64(1796630000n)]),
    shortstr('F'),
    Buffer.concat([Buffer.from('F'), withLength(inner)]),
    shortstr('A'),
    Buffer.concat([Buffer.from('A'), withLength(array)]),
    shortstr('d'),
    num('d', (b) => b.writeDoubleBE(1.5), 8),
    shortstr('f'),
    num('f', (b) => b.writeFloatBE(1.25), 4),
    shortstr('l'),
    Buffer.concat([Buffer.from('l'), i64(-9007199254740991n)]),
    shortstr('u'),
    num('u', (b) => b.writeUInt16BE(65000), 2),
    shortstr('t'),
    num('t', (b) => b.writeUInt8(1), 1),
    shortstr('V'),
    Buffer.from('V'),
    shortstr('x'),
    Buffer.concat([Buffer.from('x'), withLength(Buffer.from([0xff, 0x00, 0x41]))]),
  ]);
  const fields = Buffer.concat([
    Buffer.from([0xff, 0xfc]), // every property flag
    shortstr('application/json'),
    shortstr('gzip'),
    withLength(table),
    Buffer.from([2, 7]),
    shortstr('corr-\u00e9'),
    shortstr('reply'),
    shortstr('60000'),
    shortstr('\ufeffid-\u00e9-\uFFFD'),
    i64(1796630000n),
    shortstr('order.created'),
    shortstr('guest'),
    shortstr('app'),
    shortstr('cluster'),
  ]);
  const payload = Buffer.concat([Buffer.from([0, BASIC_CLASS, 0, 0]), i64(3n), fields]);
  const frame = Buffer.alloc(FRAME_PREFIX + payload.length + 1);
  frame[0] = FRAME_HEADER;
  frame.writeUInt16BE(1, 1);
  frame.writeUInt32BE(payload.length, 3);
  payload.copy(frame, FRAME_PREFIX);
  frame[FRAME_PREFIX + payload.length] = FRAME_END;
  return frame;
}

/**
 * Why `original` (amqplib's `recvFrame`) cannot be replaced by the lossless one: it does not read `rest` and
 * `maxFrameSize` as amqplib 2.x does, or decodes the probe frame otherwise than this module; undefined when it can.
 */
export function shapeProblem(original: unknown): string | undefined {
  if (typeof original !== 'function') return "amqplib's connection has no recvFrame method";
  const frame = probeFrame();
  const run = (recv: (this: FrameReader) => unknown): { result: unknown; rest: number } => {
    const reader = {
      rest: Buffer.concat([frame, Buffer.from([8, 0, 0, 0, 0, 0, 0, FRAME_END])]),
      maxFrameSize: 0,
      stream: { read: () => null },
      recvSinceLastCheck: false,
      recvFrame(): unknown {
        return recv.call(this);
      },
    };
    return { result: recv.call(reader), rest: reader.rest.length };
  };
  let theirs: { result: unknown; rest: number };
  let ours: { result: unknown; rest: number };
  try {
    theirs = run(original as () => unknown);
    ours = run(losslessRecvFrame(() => undefined));
  } catch (error) {
    return `amqplib's recvFrame failed on a content header frame: ${error instanceof Error ? error.message : String(error)}`;
  }
  if (theirs.rest !== 8 || ours.rest !== 8) return "amqplib's recvFrame does not consume a frame of `rest`";
  if (!isDeepStrictEqual(theirs.result, ours.result))
    return "amqplib's content header decoding differs from QueueBox's on valid UTF-8 and safe integers";
  return undefined;
}

/** Checked once per process: the prototype's `recvFrame` is the same for every connection. */
const checked = new WeakMap<object, string | undefined>();

/**
 * Installs the lossless `recvFrame` on amqplib's connection (`ChannelModel#connection`), for this connection only;
 * throws `LosslessDecodingUnavailableError` (nothing installed, amqplib's decoding stays) when amqplib's internals are
 * not the shape checked by {@link shapeProblem}. Call it before any channel is opened on the connection.
 */
export function installLosslessDecoding(connection: unknown): void {
  const target = connection as Partial<FrameReader> | null;
  const problem = (why: string) =>
    new LosslessDecodingUnavailableError(
      `amqplib's internals changed (${why}): message-ids, types, correlation-ids and header strings that are not ` +
        'UTF-8 are decoded with U+FFFD, and int64 header values past 2^53 rounded, on this connection',
    );
  if (target === null || typeof target !== 'object' || !Buffer.isBuffer(target.rest))
    throw problem('the connection has no `rest` buffer');
  const original = target.recvFrame;
  if (typeof original !== 'function') throw problem('the connection has no recvFrame method');
  if (Object.hasOwn(target, 'recvFrame')) return; // installed already
  let why = checked.get(original);
  if (!checked.has(original)) {
    why = shapeProblem(original);
    checked.set(original, why);
  }
  if (why !== undefined) throw problem(why);
  Object.defineProperty(target, 'recvFrame', {
    value: losslessRecvFrame(original as () => unknown),
    writable: true,
    configurable: true,
  });
}
