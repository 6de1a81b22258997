import type { BrokerMessage } from '@queuebox/core';
import { brokerHeaderBytesText } from '@queuebox/core';
import type { IHeaders } from 'kafkajs';

/** The default idempotency key of a Kafka record: `topic:partition:offset`, the same on every redelivery. */
export function recordKey(topic: string, partition: number, offset: string | number): string {
  return `${topic}:${partition}:${offset}`;
}

/** A header value as text; Kafka allows a null value (Java's `new RecordHeader(name, null)`): empty, as on Lambda. */
const utf8 = (value: Uint8Array | string | null) =>
  value === null ? '' : typeof value === 'string' ? value : brokerHeaderBytesText(value);

/**
 * kafkajs record headers as text: values decoded as UTF-8 (`base64:…` when not storable text, see core's
 * `brokerHeaderBytesText`); a header repeated in the record (Kafka allows it) is
 * joined with `, `, as repeated HTTP headers are.
 */
export function kafkaHeadersText(headers: IHeaders | undefined): Record<string, string> {
  const text: Record<string, string> = {};
  if (!headers) return text;
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name === '__proto__') continue;
    text[name] = Array.isArray(value)
      ? value.map((v: Uint8Array | string | null) => utf8(v)).join(', ')
      : utf8(value as Uint8Array | string | null);
  }
  return text;
}

/** The inbox message of a record a kafkajs consumer fetched. */
export function consumedRecordMessage(
  topic: string,
  partition: number,
  record: { readonly offset: string; readonly value: Buffer | null; readonly headers?: IHeaders },
): BrokerMessage {
  return {
    body: record.value ?? new Uint8Array(),
    headers: kafkaHeadersText(record.headers),
    defaultIdempotencyKey: recordKey(topic, partition, record.offset),
  };
}
