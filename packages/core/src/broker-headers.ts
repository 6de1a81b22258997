import type { Headers } from './messages.ts';
import type { OutgoingMessage } from './ports.ts';

/**
 * The header that carries the outbox row id on every broker publish (RabbitMQ, Kafka, NATS), so consumers can
 * deduplicate a message that a retry sent twice.
 */
export const MESSAGE_ID_HEADER = 'message-id';

/**
 * The application headers of a broker publish: the row's headers, then `message-id` = the outbox id, which replaces
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
