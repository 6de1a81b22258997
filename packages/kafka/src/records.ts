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

/**
 * The header that carries a record's Kafka key in the stored message: `aggregateIdHeader: x-kafka-key` makes the key
 * the aggregate id (a topic's per-key order), and a tombstone's dead row keeps its key.
 */
export const KAFKA_KEY_HEADER = 'x-kafka-key';

/**
 * Whether a header name is `x-kafka-key` in some letter case, Unicode's case mappings included (`X-KAFKA-\u212AEY`,
 * with the Kelvin sign, lower-cases to it), as the relay compares its own headers.
 */
function isKafkaKeyHeaderName(name: string): boolean {
  return name.toLowerCase() === KAFKA_KEY_HEADER || name.toUpperCase().toLowerCase() === KAFKA_KEY_HEADER;
}

/**
 * `headers` with the record key as `x-kafka-key`: the key decoded as UTF-8, or `base64:…` when it is not storable
 * text (core's `brokerHeaderBytesText`, as header values); an empty key is an empty value. A header of that name the
 * producer sent, in any letter case, is dropped: the record's own key replaces it, and a record without a key
 * (`null`) has no such header, so a producer cannot forge one. Changes `headers` and returns it.
 */
export function withKafkaKey(
  headers: Record<string, string>,
  key: Uint8Array | null | undefined,
): Record<string, string> {
  for (const name of Object.keys(headers)) {
    if (isKafkaKeyHeaderName(name)) delete headers[name];
  }
  if (key !== null && key !== undefined) headers[KAFKA_KEY_HEADER] = brokerHeaderBytesText(key);
  return headers;
}

/** The inbox message of a record a kafkajs consumer fetched (kafkajs gives `key: null` for a record without one). */
export function consumedRecordMessage(
  topic: string,
  partition: number,
  record: {
    readonly offset: string;
    readonly timestamp: string;
    readonly key?: Buffer | null;
    readonly value: Buffer | null;
    readonly headers?: IHeaders;
  },
): BrokerMessage {
  return {
    body: record.value ?? new Uint8Array(),
    headers: withKafkaKey(kafkaHeadersText(record.headers), record.key),
    defaultIdempotencyKey: recordKey(topic, partition, record.offset, record.timestamp),
  };
}
