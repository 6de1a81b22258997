import { brokerHeaderBytesText } from '@queuebox/core';

/**
 * AMQP header tables hold typed values (long strings, integers, booleans, timestamps, nested tables, arrays, byte
 * arrays); the inbox stores headers as text. These functions decide how each becomes text.
 */

function isByteArray(value: unknown): value is Uint8Array {
  return value instanceof Uint8Array;
}

/** A value inside a table or an array, as JSON: byte arrays and typed values as at the top (`headerText`). */
function toJsonable(value: unknown): unknown {
  if (isByteArray(value)) return brokerHeaderBytesText(value);
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map(toJsonable);
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length === 1 && Array.isArray(record.bytes))
      return brokerHeaderBytesText(Uint8Array.from(record.bytes as number[]));
    if (keys.length === 2 && typeof record['!'] === 'string' && 'value' in record)
      return toJsonable(record.value);
    return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, toJsonable(v)]));
  }
  return value;
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
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length === 1 && Array.isArray(record.bytes)) {
      return brokerHeaderBytesText(Uint8Array.from(record.bytes as number[]));
    }
    if (keys.length === 2 && typeof record['!'] === 'string' && 'value' in record) {
      return headerText(record.value) ?? '';
    }
  }
  return JSON.stringify(toJsonable(value));
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
