import { brokerHeaderBytesText } from '@queuebox/core';

/**
 * AMQP header tables hold typed values (long strings, integers, booleans, timestamps, nested tables, arrays, byte
 * arrays); the inbox stores headers as text. These functions decide how each becomes text.
 */

/**
 * A real byte array (amqplib's Buffer). `instanceof` alone is fooled by a table whose key is `__proto__`: amqplib
 * decodes a table by assignment, so `{ "__proto__": <byte array> }` becomes an object whose prototype is a Buffer,
 * which `brokerHeaderBytesText` then failed on with a TypeError that crashed the consumer's process.
 */
function isByteArray(value: unknown): value is Uint8Array {
  return ArrayBuffer.isView(value) && value instanceof Uint8Array;
}

const isByte = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 255;

/**
 * A byte array as amqplib (a Buffer) or an Amazon MQ event (`{ bytes: [0–255, …] }`) gives it, else undefined. A
 * table `{ bytes: [...] }` holding anything but byte values is a table: `Uint8Array.from` made `["a"]` a zero byte,
 * and threw on a bigint.
 */
function bytesOf(value: unknown): Uint8Array | undefined {
  if (isByteArray(value)) return value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const bytes = record.bytes;
  return keys.length === 1 && Array.isArray(bytes) && bytes.every(isByte)
    ? Uint8Array.from(bytes as number[])
    : undefined;
}

/** amqplib's typed value (`{ '!': 'timestamp', value }`): the value, else undefined. */
function typedValue(value: unknown): { readonly value: unknown } | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  return keys.length === 2 && typeof record['!'] === 'string' && 'value' in record
    ? { value: record.value }
    : undefined;
}

/** A table or an array being written by {@link jsonText}. */
type Open =
  | { readonly array: readonly unknown[]; next: number }
  | { readonly entries: readonly (readonly [string, unknown])[]; next: number; written: number };

/**
 * A table or an array as JSON text, with the values in it read as at the top (`headerText`): byte arrays as UTF-8
 * or `base64:…`, typed values as their value, bigints as decimal strings; what JSON.stringify leaves out is left
 * out. Written without recursion: a header table nested a few thousand levels deep (amqplib encodes and decodes
 * one, and any client may publish it) overflowed the stack of a recursive walk, a RangeError thrown in the
 * consumer's delivery callback that crashed the whole process, and again at every restart (the delivery was never
 * acknowledged).
 */
function jsonText(root: unknown): string | undefined {
  let out = '';
  const stack: Open[] = [];
  /** Writes a value, or opens a table or an array; false when JSON leaves it out (undefined, a function). */
  const write = (value: unknown): boolean => {
    for (let typed = typedValue(value); typed !== undefined; typed = typedValue(value)) value = typed.value;
    const bytes = bytesOf(value);
    if (bytes !== undefined) {
      out += JSON.stringify(brokerHeaderBytesText(bytes));
      return true;
    }
    if (typeof value === 'bigint') {
      out += JSON.stringify(value.toString());
      return true;
    }
    if (Array.isArray(value)) {
      out += '[';
      stack.push({ array: value, next: 0 });
      return true;
    }
    // Any other object is a table, its own keys only: an inherited `toJSON` is not called (a table whose
    // prototype a `__proto__` key made a Buffer would throw in Buffer's).
    if (value !== null && typeof value === 'object') {
      out += '{';
      stack.push({ entries: Object.entries(value), next: 0, written: 0 });
      return true;
    }
    const text: string | undefined = JSON.stringify(value);
    if (text === undefined) return false;
    out += text;
    return true;
  };
  if (!write(root)) return undefined;
  for (let top = stack.at(-1); top !== undefined; top = stack.at(-1)) {
    if ('array' in top) {
      if (top.next >= top.array.length) {
        out += ']';
        stack.pop();
        continue;
      }
      if (top.next > 0) out += ',';
      const element = top.array[top.next++];
      if (!write(element)) out += 'null';
      continue;
    }
    if (top.next >= top.entries.length) {
      out += '}';
      stack.pop();
      continue;
    }
    const [key, element] = top.entries[top.next++] as readonly [string, unknown];
    const before = out;
    out += `${top.written > 0 ? ',' : ''}${JSON.stringify(key)}:`;
    if (write(element)) top.written++;
    else out = before;
  }
  return out;
}

/**
 * The text of one header value: strings as they are; numbers, bigints and booleans in decimal / `true`/`false`;
 * byte arrays (amqplib Buffers, Amazon MQ `{ bytes: [...] }`) decoded as UTF-8, or `base64:…` when not storable text
 * (core's `brokerHeaderBytesText`); amqplib's typed values
 * (`{ '!': 'timestamp', value }`) as their value; tables and arrays as JSON, with the values in them read the same
 * way (a byte array in `x-death` is as lossless as one at the top). `null`/`undefined` → undefined (the
 * header is left out).
 */
export function headerText(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean')
    return String(value);
  if (isByteArray(value)) return brokerHeaderBytesText(value);
  const bytes = bytesOf(value);
  if (bytes !== undefined) return brokerHeaderBytesText(bytes);
  if (typedValue(value) === undefined) return jsonText(value);
  // Typed values in typed values, unwrapped in a loop (no recursion, as in jsonText).
  let inner: unknown = value;
  for (let typed = typedValue(inner); typed !== undefined; typed = typedValue(inner)) inner = typed.value;
  return headerText(inner) ?? '';
}

/** Every header of a table as text (see `headerText`); absent values are left out. */
export function headersText(
  table: Readonly<Record<string, unknown>> | null | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {};
  if (!table) return headers;
  for (const [name, value] of Object.entries(table)) {
    const text = headerText(value);
    if (text !== undefined && name !== '__proto__') headers[name] = text;
  }
  return headers;
}

/** The header a quorum queue puts on a message returned to it: its failed deliveries so far (absent on its first). */
export const DELIVERY_COUNT_HEADER = 'x-delivery-count';

/** A quorum queue's delivery-limit by default since RabbitMQ 4.0 (`sources.<name>.deliveryLimit`'s default). */
export const DEFAULT_DELIVERY_LIMIT = 20;

/**
 * `message`, marked as its broker's last delivery (`lastDelivery`) when it is a redelivery (`redelivered`, which only
 * the broker sets) whose `x-delivery-count` has reached the queue's `deliveryLimit`: the broker drops (or
 * dead-letters) a message whose failed deliveries pass the limit, so a failure of this delivery makes it a dead row at
 * once instead. Only quorum queues count deliveries; a message without the header is left as it is, and so is every
 * message of a queue without a limit (`deliveryLimit` 0).
 *
 * The header is the broker's state of the message in this queue, not the message's: it is taken out of the headers
 * (under any letter case), so it is never stored with the row, nor relayed to a queue where a second consumer would
 * read it as its own count. On a first delivery (`redelivered` false) it can only be a publisher's (a classic queue
 * keeps what the publisher set; a quorum queue sets it only on a message returned to it), and is not trusted: a
 * relayed `x-delivery-count: 25` made a single failure of a first delivery a dead row at once.
 */
export function withLastDelivery<M extends { readonly headers: Readonly<Record<string, string>> }>(
  message: M,
  deliveryLimit: number,
  redelivered: boolean,
): M & { readonly lastDelivery?: true } {
  const text = message.headers[DELIVERY_COUNT_HEADER];
  let headers: Record<string, string> | undefined;
  for (const name of Object.keys(message.headers)) {
    if (name.toLowerCase() !== DELIVERY_COUNT_HEADER) continue;
    headers ??= { ...message.headers };
    delete headers[name];
  }
  const stripped: M = headers === undefined ? message : { ...message, headers };
  if (!redelivered || deliveryLimit <= 0) return stripped; // a publisher's header, or a queue without a limit
  const count = text === undefined ? Number.NaN : Number(text);
  return Number.isInteger(count) && count >= deliveryLimit ? { ...stripped, lastDelivery: true } : stripped;
}
