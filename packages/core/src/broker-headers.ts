import type { Headers } from './messages.ts';
import type { OutgoingMessage } from './ports/publisher.ts';
import { isStorableText } from './storable-text.ts';

/**
 * The header that carries the message id (`OutgoingMessage.id`: `<installId>-<rowId>` for an outbox row, see
 * `outboxMessageId`) on every broker publish (RabbitMQ, Kafka, NATS, SQS and SNS attributes), so consumers can
 * deduplicate a message that a retry sent twice, across every QueueBox that publishes to them.
 */
export const MESSAGE_ID_HEADER = 'message-id';

/**
 * The application headers of a broker publish: the row's headers, then `message-id` = the message id, which replaces
 * a row header of that name in any letter case (a sender cannot forge the id consumers deduplicate on).
 */
export function brokerPublishHeaders(message: Pick<OutgoingMessage, 'id' | 'headers'>): Headers {
  const headers: Headers = {};
  for (const [name, value] of Object.entries(message.headers)) {
    if (name.toLowerCase() !== MESSAGE_ID_HEADER) headers[name] = value;
  }
  headers[MESSAGE_ID_HEADER] = message.id;
  return headers;
}

/**
 * The prefix of a broker header value (or name) stored as the standard base64 of its bytes, because the bytes are
 * not text a store can keep: not UTF-8, or holding U+0000 (PostgreSQL's jsonb refuses `\u0000`), or an unpaired
 * UTF-16 surrogate. A value that arrives as text starting with `base64:` is stored as it came.
 */
export const BASE64_HEADER_PREFIX = 'base64:';

function base64Of(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return `${BASE64_HEADER_PREFIX}${btoa(binary)}`;
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true });
const utf8Encoder = new TextEncoder();

/**
 * The text to store for header bytes a broker delivered (Kafka header values, AMQP byte arrays): the UTF-8 text when
 * the bytes are storable UTF-8, else `base64:` + their base64. Never throws, so one poison header cannot fail the
 * batch it came in.
 */
export function brokerHeaderBytesText(bytes: Uint8Array): string {
  let text: string;
  try {
    text = utf8Decoder.decode(bytes);
  } catch {
    return base64Of(bytes);
  }
  return isStorableText(text) ? text : base64Of(bytes);
}

/**
 * A header name or value that arrived as text (NATS, amqplib strings), made storable: as it is when it is, else
 * `base64:` + the base64 of its UTF-8 bytes (an unpaired surrogate counts as U+FFFD there).
 */
export function storableHeaderText(text: string): string {
  return isStorableText(text) ? text : base64Of(utf8Encoder.encode(text));
}
