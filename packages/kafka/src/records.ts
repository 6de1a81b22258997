import type { BrokerMessage } from '@queuebox/core';
import { brokerHeaderBytesText } from '@queuebox/core';
import type { IHeaders } from 'kafkajs';

/**
 * The default idempotency key of a Kafka record: `topic:partition:offset@timestamp` (the record's timestamp in ms,
 * as the log keeps it: CreateTime or LogAppendTime), the same on every redelivery, from a consumer or from a Lambda
 * event. A topic deleted and created again starts its offsets at 0, so `topic:partition:offset` alone took its new
 * records for duplicates of rows the inbox still kept; their timestamps differ.
 */
export function recordKey(
  topic: string,
  partition: number,
  offset: string | number,
  timestamp: string | number,
): string {
  return `${topic}:${partition}:${offset}@${timestamp}`;
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
  record: {
    readonly offset: string;
    readonly timestamp: string;
    readonly value: Buffer | null;
    readonly headers?: IHeaders;
  },
): BrokerMessage {
  return {
    body: record.value ?? new Uint8Array(),
    headers: kafkaHeadersText(record.headers),
    defaultIdempotencyKey: recordKey(topic, partition, record.offset, record.timestamp),
  };
}
