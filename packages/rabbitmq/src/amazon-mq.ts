import type {
  BrokerBatchReport,
  BrokerIngestionPort,
  BrokerIngestResult,
  BrokerMessage,
} from '@queuebox/core';
import { ConfigError, ingestInOrder, QueueBoxError, UnexpectedEventError } from '@queuebox/core';
import { DEFAULT_DELIVERY_LIMIT, headersText, withLastDelivery } from './amqp-headers.ts';

// @types/aws-lambda has no Amazon MQ event; these follow the documented shape
// (https://docs.aws.amazon.com/lambda/latest/dg/with-mq.html) and Powertools' RabbitMQ data class.

/** `basicProperties` of one message; string header values arrive as `{ bytes: number[] }`. */
export interface AmazonMqBasicProperties {
  readonly contentType?: string | null;
  readonly contentEncoding?: string | null;
  readonly headers?: Readonly<Record<string, unknown>> | null;
  readonly deliveryMode?: number | null;
  readonly priority?: number | null;
  readonly correlationId?: string | null;
  readonly replyTo?: string | null;
  readonly expiration?: string | null;
  readonly messageId?: string | null;
  readonly timestamp?: string | null;
  readonly type?: string | null;
  readonly userId?: string | null;
  readonly appId?: string | null;
  readonly clusterId?: string | null;
  readonly bodySize?: number | null;
}

/** One RabbitMQ message in an Amazon MQ event; `data` is the base64 body. */
export interface AmazonMqRabbitMessage {
  readonly basicProperties: AmazonMqBasicProperties;
  readonly redelivered: boolean;
  readonly data: string;
}

/** The event of an Amazon MQ for RabbitMQ event source mapping. Keys of `rmqMessagesByQueue` are `queue::vhost`. */
export interface AmazonMqRabbitEvent {
  readonly eventSource: 'aws:rmq';
  readonly eventSourceArn: string;
  readonly rmqMessagesByQueue: Readonly<Record<string, readonly AmazonMqRabbitMessage[]>>;
}

/** One decoded message and the queue it came from. */
export interface AmazonMqDelivery {
  readonly queue: string;
  readonly vhost: string;
  readonly message: BrokerMessage;
  /** The broker's `redelivered` flag: only then is an `x-delivery-count` header the broker's (see withLastDelivery). */
  readonly redelivered?: boolean;
}

const textOf = (value: string | null | undefined) =>
  typeof value === 'string' && value !== '' ? value : undefined;

/** `rmqMessagesByQueue` as the event documents it: an object of message arrays. */
function isMessagesByQueue(value: unknown): value is AmazonMqRabbitEvent['rmqMessagesByQueue'] {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((messages) => Array.isArray(messages))
  );
}

/** Splits a `rmqMessagesByQueue` key, `queue::vhost`, at its last `::` (queue names may contain `::`). */
export function parseQueueKey(key: string): { queue: string; vhost: string } {
  const at = key.lastIndexOf('::');
  return at === -1 ? { queue: key, vhost: '/' } : { queue: key.slice(0, at), vhost: key.slice(at + 2) };
}

/**
 * The messages of an Amazon MQ event, in the event's order: base64 `data` decoded, headers as text (`{ bytes }`
 * decoded as UTF-8, numbers in decimal), and the `messageId`, `type` and `correlationId` properties. Pure.
 */
export function amazonMqDeliveries(event: AmazonMqRabbitEvent): AmazonMqDelivery[] {
  const byQueue: unknown = event?.rmqMessagesByQueue;
  if (event?.eventSource !== 'aws:rmq' || !isMessagesByQueue(byQueue)) {
    // An Amazon MQ for ActiveMQ event (`aws:mq`, `messages`) answered with success would be acknowledged unstored.
    throw new UnexpectedEventError(
      `Not an Amazon MQ for RabbitMQ event (eventSource ${JSON.stringify(event?.eventSource ?? null)}, expected "aws:rmq" with rmqMessagesByQueue): nothing was stored, and the invocation fails so the broker keeps the messages`,
      { context: { eventSource: event?.eventSource ?? null } },
    );
  }
  const deliveries: AmazonMqDelivery[] = [];
  for (const [key, messages] of Object.entries(byQueue)) {
    const { queue, vhost } = parseQueueKey(key);
    for (const item of messages) {
      const properties = item.basicProperties ?? {};
      deliveries.push({
        queue,
        vhost,
        message: {
          body: Buffer.from(item.data ?? '', 'base64'),
          headers: headersText(properties.headers),
          messageId: textOf(properties.messageId),
          type: textOf(properties.type),
          correlationId: textOf(properties.correlationId),
        },
        redelivered: item.redelivered === true,
      });
    }
  }
  return deliveries;
}

/** No configured AMQP source consumes the queue an event came from. */
export class UnmappedQueueError extends QueueBoxError {}

/** The sources slice the handler reads: AMQP sources by name with their queue. */
export type AmqpSourcesByName = Readonly<
  Record<string, { readonly type: string; readonly queue?: string; readonly deliveryLimit?: number }>
>;

/** Options of the Amazon MQ handler. */
export interface AmazonMqHandlerOptions {
  readonly ingestion: BrokerIngestionPort;
  /** `sources`: the AMQP source whose `queue` matches the event's queue receives its messages. */
  readonly sources: AmqpSourcesByName;
  /** Called after each committed message (e.g. to wake the relay once per event). */
  readonly onIngested?: (result: BrokerIngestResult, delivery: AmazonMqDelivery) => void;
}

/** What one event came to. */
export type AmazonMqReport = BrokerBatchReport;

/** The AMQP source consuming each queue; a queue named by two sources is a configuration error. */
export function sourcesByQueue(sources: AmqpSourcesByName): Map<string, string> {
  const byQueue = new Map<string, string>();
  const issues: { path: string; message: string }[] = [];
  for (const [name, source] of Object.entries(sources)) {
    if (source.type !== 'amqp' || source.queue === undefined) continue;
    const taken = byQueue.get(source.queue);
    if (taken !== undefined) {
      issues.push({
        path: `sources.${name}.queue`,
        message: `queue "${source.queue}" is already consumed by source ${taken}; an Amazon MQ event could not tell them apart`,
      });
    } else byQueue.set(source.queue, name);
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return byQueue;
}

/**
 * The body of functions/amqp-source.ts: stores every message of an Amazon MQ for RabbitMQ event through the broker
 * ingestion, one after another in the event's order (a rejected message becomes a dead row, as in the consumer).
 * Any failure — `StoreUnavailableError` above all, or a queue no source consumes — rejects, so the invocation fails
 * and Lambda returns the whole batch to the queue; the messages already stored come back as duplicates. An outage
 * stops the batch at once; any other failure (a poison message) only once the rest of the batch is stored, so the
 * redeliveries of the batch, each of which a quorum queue counts against its delivery limit, find them stored.
 */
export function createAmazonMqHandler(
  options: AmazonMqHandlerOptions,
): (event: AmazonMqRabbitEvent) => Promise<AmazonMqReport> {
  const byQueue = sourcesByQueue(options.sources);
  const sourceOf = (delivery: AmazonMqDelivery): string => {
    const source = byQueue.get(delivery.queue);
    if (source === undefined) {
      throw new UnmappedQueueError(`No AMQP source consumes queue "${delivery.queue}"`, {
        context: { queue: delivery.queue, vhost: delivery.vhost },
      });
    }
    return source;
  };
  // A message on its last delivery (`x-delivery-count` at its source's deliveryLimit) is marked so (see
  // withLastDelivery); a queue no source consumes fails in ingestInOrder, in the event's order.
  const marked = (delivery: AmazonMqDelivery): AmazonMqDelivery => {
    const source = byQueue.get(delivery.queue);
    if (source === undefined) return delivery;
    const limit = options.sources[source]?.deliveryLimit ?? DEFAULT_DELIVERY_LIMIT;
    return { ...delivery, message: withLastDelivery(delivery.message, limit, delivery.redelivered === true) };
  };
  return async (event) =>
    ingestInOrder(options.ingestion, amazonMqDeliveries(event).map(marked), sourceOf, options.onIngested, {
      goOnAfterFailures: true,
    });
}
