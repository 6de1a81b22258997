/**
 * The lossless content header decoding (amqp-lossless.ts) against amqplib's own codec and connection, no broker:
 * amqplib's internals must still be the shape it relies on (these tests fail when an amqplib upgrade changes them),
 * it decodes valid input exactly as amqplib does, and keeps what amqplib loses.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  amqpStringText,
  decodeBasicProperties,
  decodeTable,
  installLosslessDecoding,
  isLosslessProperties,
  LosslessDecodingUnavailableError,
  shapeProblem,
} from '../src/amqp-lossless.ts';
import { headersText } from '../src/index.ts';

// amqplib's package exports only its API: its modules are reached by path, as a test may.
const require = createRequire(import.meta.url);
const lib = join(dirname(require.resolve('amqplib')), 'lib');
const { Connection } = require(join(lib, 'connection.js')) as {
  Connection: { prototype: { recvFrame: () => unknown } };
};
const codec = require(join(lib, 'codec.js')) as {
  encodeTable(buffer: Buffer, value: unknown, offset: number): number;
  decodeFields(slice: Buffer): Record<string, unknown>;
};
const defs = require(join(lib, 'defs.js')) as {
  encodeProperties(id: number, channel: number, size: number, fields: Record<string, unknown>): Buffer;
  decode(id: number, buffer: Buffer): Record<string, unknown>;
  BasicProperties: number;
};

/** A table's bytes (without its length), as amqplib encodes it. */
function encoded(table: Record<string, unknown>): Buffer {
  const buffer = Buffer.alloc(1 << 20);
  const size = codec.encodeTable(buffer, table, 0);
  return Buffer.from(buffer.subarray(4, size));
}

/** A content header frame as amqplib writes one (`encodeProperties`). */
const headerFrame = (properties: Record<string, unknown>, size = 5) =>
  defs.encodeProperties(defs.BasicProperties, 3, size, properties);

/** A reader with amqplib's connection as its prototype (as `new Connection(socket)` is), fed `chunks` by its stream. */
function reader(chunks: Buffer[]) {
  const self = Object.create(Connection.prototype) as {
    rest: Buffer;
    maxFrameSize: number;
    stream: { read(): Buffer | null };
    recvSinceLastCheck: boolean;
    recvFrame(): unknown;
  };
  self.rest = Buffer.alloc(0);
  self.maxFrameSize = 4096;
  self.recvSinceLastCheck = false;
  self.stream = { read: () => chunks.shift() ?? null };
  return self;
}

describe("amqplib's internals (fails when an amqplib upgrade changes them)", () => {
  it("amqplib's recvFrame decodes the probe frame exactly as the lossless one", () => {
    expect(shapeProblem(Connection.prototype.recvFrame)).toBeUndefined();
  });

  it('installs on a connection of amqplib, for that connection only', () => {
    const connection = reader([]);
    installLosslessDecoding(connection);
    expect(Object.hasOwn(connection, 'recvFrame')).toBe(true);
    expect(Object.hasOwn(reader([]), 'recvFrame')).toBe(false);
    installLosslessDecoding(connection); // a second install changes nothing
  });

  it('refuses a recvFrame that decodes otherwise, and a connection without the fields it reads', () => {
    const other = Object.create(Connection.prototype);
    other.rest = Buffer.alloc(0);
    other.recvFrame = function recvFrame() {
      const frame = Connection.prototype.recvFrame.call(this) as { fields?: Record<string, unknown> };
      if (frame?.fields) frame.fields.messageId = 'changed';
      return frame;
    };
    // An own recvFrame counts as installed: its prototype's is the one checked.
    const proto = Object.create(Connection.prototype);
    proto.recvFrame = other.recvFrame;
    const changed = Object.create(proto);
    changed.rest = Buffer.alloc(0);
    expect(() => installLosslessDecoding(changed)).toThrow(LosslessDecodingUnavailableError);
    expect(Object.hasOwn(changed, 'recvFrame')).toBe(false);
    expect(() => installLosslessDecoding({ recvFrame() {} })).toThrow(LosslessDecodingUnavailableError);
  });
});

describe('lossless decoding', () => {
  it('decodes valid tables as amqplib does (every type, nested, in arrays)', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const words = ['a', 'é', '\ufeffbom', '\u0000', '\uFFFD', 'x'.repeat(200), '日本', '😀'];
    const leaf = (): unknown => {
      const pick = Math.floor(random() * 12);
      if (pick === 0) return words[Math.floor(random() * words.length)];
      if (pick === 1) return Math.floor(random() * 2 ** 53) * (random() < 0.5 ? -1 : 1);
      if (pick === 2) return { '!': 'timestamp', value: Math.floor(random() * 2 ** 40) };
      if (pick === 3) return { '!': 'decimal', value: { places: 2, digits: 12345 } };
      if (pick === 4) return { '!': 'float', value: 1.5 };
      if (pick === 5) return random() < 0.5;
      if (pick === 6) return null;
      if (pick === 7) return Buffer.from([0xff, 0, 0x41]);
      if (pick === 8) return 0.25;
      if (pick === 9) return { '!': 'unsignedint', value: 4_000_000_000 };
      if (pick === 10) return [leaf(), leaf(), [leaf()]];
      return { inner: leaf(), more: [leaf(), { deeper: leaf() }] };
    };
    for (let n = 0; n < 300; n++) {
      const table: Record<string, unknown> = {};
      for (let k = 0; k < 6; k++) table[`${words[k % words.length]}${k}`] = leaf();
      const bytes = encoded(table);
      expect(decodeTable(bytes)).toStrictEqual(codec.decodeFields(bytes));
    }
  });

  it('keeps strings that are not UTF-8 as base64 and int64 values past 2^53 exact', () => {
    // Prepare: amqplib's own encoding of a table, then bytes that are not UTF-8 put in place of the 'Z' markers.
    const bytes = encoded({
      xZ: 'name',
      raw: 'AZB',
      big: { '!': 'long', value: 9007199254740993n },
      small: { '!': 'long', value: -9223372036854775808n },
      ts: { '!': 'timestamp', value: 18446744073709551615n },
      nested: { list: ['Z', { '!': 'long', value: 9223372036854775807n }] },
    });
    for (let at = bytes.indexOf('Z'); at >= 0; at = bytes.indexOf('Z')) bytes[at] = 0xff;
    // Act
    const decoded = decodeTable(bytes);
    // Assess
    expect(codec.decodeFields(bytes).raw).toBe('A\uFFFDB'); // what amqplib gives
    expect(decoded).toStrictEqual({
      'base64:eP8=': 'name',
      raw: 'base64:Qf9C',
      big: 9007199254740993n,
      small: -9223372036854775808n,
      ts: { '!': 'timestamp', value: 18446744073709551615n },
      nested: { list: ['base64:/w==', 9223372036854775807n] },
    });
    expect(headersText(decoded)).toMatchObject({
      raw: 'base64:Qf9C',
      big: '9007199254740993',
      ts: '18446744073709551615',
      nested: '{"list":["base64:/w==","9223372036854775807"]}',
    });
  });

  it('reads a table nested 20,000 levels deep without recursion, and a "__proto__" key as an own property', () => {
    // Written by hand: amqplib's recursive encoder overflows at this depth (its decoder too).
    const levels = 20_000;
    const leaf = encoded({ leaf: 'x' });
    const bytes = Buffer.alloc(levels * 7 + leaf.length);
    for (let i = 0; i < levels; i++) {
      bytes.write('\u0001aF', i * 7, 'latin1');
      bytes.writeUInt32BE((levels - 1 - i) * 7 + leaf.length, i * 7 + 3);
    }
    leaf.copy(bytes, levels * 7);
    expect(() => codec.decodeFields(bytes)).toThrow(RangeError);
    let decoded: Record<string, unknown> = decodeTable(bytes);
    for (let i = 0; i < levels; i++) decoded = decoded.a as Record<string, unknown>;
    expect(decoded).toStrictEqual({ leaf: 'x' });
    const proto = decodeTable(encoded(JSON.parse('{"__proto__":{"k":"v"}}')));
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
    expect(Object.keys(proto)).toEqual(['__proto__']);
  });

  it('text: UTF-8 as amqplib gives it, else base64 of the bytes', () => {
    for (const s of ['', 'plain', '\ufeffbom', 'caf\u00e9', '\uFFFD', 'a\u0000b', '😀'])
      expect(amqpStringText(Buffer.from(s))).toBe(Buffer.from(s).toString('utf8'));
    expect(amqpStringText(Buffer.from([0x63, 0x61, 0x66, 0xe9]))).toBe('base64:Y2Fm6Q==');
    expect(amqpStringText(Buffer.from([0xed, 0xa0, 0x80]))).toBe('base64:7aCA'); // an encoded surrogate
  });

  it('decodes properties as amqplib does, and marks them', () => {
    const properties = {
      contentType: 'application/json',
      headers: { a: 1, b: 'é' },
      deliveryMode: 2,
      messageId: 'id-é',
      timestamp: 1796630000,
      type: 't',
      appId: 'app',
    };
    const frame = headerFrame(properties);
    const payload = frame.subarray(7, frame.length - 1);
    const ours = decodeBasicProperties(payload.subarray(12));
    expect(ours).toStrictEqual(defs.decode(defs.BasicProperties, payload.subarray(12)));
    expect(isLosslessProperties(ours)).toBe(true);
    expect(isLosslessProperties(defs.decode(defs.BasicProperties, payload.subarray(12)))).toBe(false);
    const none = headerFrame({});
    expect(decodeBasicProperties(none.subarray(7 + 12, none.length - 1))).toStrictEqual({});
  });
});

describe('the installed recvFrame', () => {
  it('decodes header frames split across reads and leaves every other frame to amqplib', () => {
    // Prepare: a heartbeat, a content header whose message-id is not UTF-8, a body frame; in 3-byte chunks.
    const header = headerFrame({ messageId: 'idZ', headers: { n: { '!': 'long', value: 2n ** 60n } } }, 2);
    header[header.indexOf('Z')] = 0xe9;
    const body = Buffer.from([3, 0, 3, 0, 0, 0, 2, 0x68, 0x69, 206]);
    const heartbeat = Buffer.from([8, 0, 0, 0, 0, 0, 0, 206]);
    const wire = Buffer.concat([heartbeat, header, body]);
    const chunks: Buffer[] = [];
    for (let i = 0; i < wire.length; i += 3) chunks.push(wire.subarray(i, i + 3));
    const connection = reader(chunks);
    installLosslessDecoding(connection);
    // Act
    const frames: unknown[] = [];
    for (let frame = connection.recvFrame(); frame; frame = connection.recvFrame()) frames.push(frame);
    // Assess
    expect(frames).toHaveLength(3);
    expect(frames[0]).toEqual({ channel: 0 });
    const fields = (
      frames[1] as { id: number; channel: number; size: number; fields: Record<string, unknown> }
    ).fields;
    expect(frames[1]).toMatchObject({ id: 60, channel: 3, size: 2 });
    expect(fields.messageId).toBe('base64:aWTp');
    expect(fields.headers).toStrictEqual({ n: 2n ** 60n });
    expect(frames[2]).toEqual({ channel: 3, content: Buffer.from('hi') });
    expect(connection.rest).toHaveLength(0);
  });

  it('leaves a frame over maxFrameSize, or a bad frame end, to amqplib, which refuses it', () => {
    const header = headerFrame({ messageId: 'x' });
    const big = reader([header]);
    big.maxFrameSize = 10;
    installLosslessDecoding(big);
    expect(() => big.recvFrame()).toThrow(/exceeds maxFrameSize/);
    const bad = Buffer.from(header);
    bad[bad.length - 1] = 0;
    const broken = reader([bad]);
    installLosslessDecoding(broken);
    expect(() => broken.recvFrame()).toThrow(/Invalid frame/);
  });
});
