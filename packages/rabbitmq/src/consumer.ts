import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage } from '@queuebox/core';
import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { headersText } from './amqp-headers.ts';
import { type AmqpConnection, createAmqpConnection, describeAmqpError } from './connection.ts';

/** `sources.<name>` of `type: amqp`, the fields the consumer reads (the validated configuration fits). */
export interface AmqpSourceOptions {
  /** Broker URL, `amqp://` or `amqps://`. */
  readonly url: string;
  /** The queue to consume; it must exist (the consumer declares nothing). */
  readonly queue: string;
  /** Unacknowledged messages in flight. Default 10. */
  readonly prefetch?: number;
}

/** Options of the long-lived consumer. */
export interface RabbitMqConsumerOptions extends AmqpSourceOptions {
  /** The source's name: what `ingest` is called with. */
  readonly source: string;
  readonly ingestion: BrokerIngestionPort;
  /**
   * How long a message whose ingestion failed (database unavailable, or any other error) is held before it is
   * requeued, so a database outage does not spin. Default 1000 ms.
   */
  readonly retryDelayMs?: number;
  /** First delay before reconnecting after the connection or channel broke; doubles up to 30 s. Default 500 ms. */
  readonly reconnectDelayMs?: number;
  /** Called after each committed message (e.g. to wake the relay). */
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  /** Called with every failure: ingestion errors, connection losses, reconnect attempts (for logs). */
  readonly onError?: (error: unknown, context: { readonly during: 'ingest' | 'connect' | 'consume' }) => void;
}

/** A running consumer. */
export interface RabbitMqConsumer {
  /** Connects and starts consuming; rejects when the first connection fails (it keeps retrying in the background). */
  start(): Promise<void>;
  /** Stops consuming, waits for the messages in hand to be settled, closes the connection. */
  close(): Promise<void>;
  /** Whether a channel is consuming right now. */
  readonly consuming: boolean;
}

/** What the inbox receives for one AMQP delivery: body, headers as text, and the message-id/type/correlation-id properties. */
export function toBrokerMessage(message: Pick<ConsumeMessage, 'content' | 'properties'>): BrokerMessage {
  const { properties } = message;
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  return {
    body: message.content,
    headers: headersText(properties.headers),
    messageId: text(properties.messageId),
    type: text(properties.type),
    correlationId: text(properties.correlationId),
  };
}

const MAX_RECONNECT_DELAY_MS = 30_000;

/**
 * The long-lived consumer of an AMQP source for the local runtime. Each delivery is handed to the broker
 * ingestion and acknowledged only after it resolved, i.e. after the inbox row (pending or dead) committed. When it
 * rejects (the database is unavailable, or a bug), the message is held `retryDelayMs` and then
 * `nack`ed with requeue, so it comes back. At most `prefetch` deliveries are in hand at once. When the connection
 * or the channel breaks, unacknowledged deliveries return to the queue (the broker does that) and the consumer
 * reconnects with a growing delay until `close()`.
 */
export function createRabbitMqConsumer(options: RabbitMqConsumerOptions): RabbitMqConsumer {
  const retryDelayMs = options.retryDelayMs ?? 1000;
  const firstReconnectDelay = options.reconnectDelayMs ?? 500;
  const connection: AmqpConnection = createAmqpConnection({
    url: options.url,
    connectionName: `queuebox consumer ${options.source}`,
  });
  const report = (error: unknown, during: 'ingest' | 'connect' | 'consume') => {
    try {
      options.onError?.(error, { during });
    } catch {
      // A logging hook must not stop the consumer.
    }
  };
  connection.onProblem = (error) => report(error, 'consume');

  let closed = false;
  let channel: { readonly channel: Channel; readonly consumerTag: string } | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let reconnectDelay = firstReconnectDelay;
  const inHand = new Set<Promise<void>>();
  const sleeping = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (closed) return resolve();
      const entry = {
        timer: setTimeout(() => {
          sleeping.delete(entry);
          resolve();
        }, ms),
        wake: () => {
          clearTimeout(entry.timer);
          sleeping.delete(entry);
          resolve();
        },
      };
      sleeping.add(entry);
    });

  async function handle(on: Channel, delivery: ConsumeMessage): Promise<void> {
    const message = toBrokerMessage(delivery);
    try {
      const result = await options.ingestion.ingest(options.source, message);
      on.ack(delivery);
      options.onIngested?.(result, message);
    } catch (error) {
      report(error, 'ingest');
      await pause(retryDelayMs);
      try {
        on.nack(delivery, false, true);
      } catch {
        // The channel is gone: the broker requeued the delivery already.
      }
    }
  }

  function scheduleReconnect() {
    if (closed || reconnectTimer) return;
    const delay = reconnectDelay;
    reconnectDelay = Math.min(MAX_RECONNECT_DELAY_MS, reconnectDelay * 2);
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      consume().catch((error: unknown) => {
        report(error, 'connect');
        scheduleReconnect();
      });
    }, delay);
  }

  async function consume(): Promise<void> {
    if (closed) return;
    const model: ChannelModel = await connection.connection();
    const opened = await model.createChannel();
    try {
      opened.on('error', (error: Error) => report(error, 'consume'));
      opened.on('close', () => {
        if (channel?.channel === opened) channel = undefined;
        scheduleReconnect();
      });
      await opened.prefetch(options.prefetch ?? 10);
      const { consumerTag } = await opened.consume(
        options.queue,
        (delivery) => {
          if (delivery === null) return; // cancelled by the broker (queue deleted): the close handler reconnects
          const handling = handle(opened, delivery).finally(() => inHand.delete(handling));
          inHand.add(handling);
        },
        { noAck: false },
      );
      if (closed) {
        await opened.close().catch(() => undefined);
        return;
      }
      channel = { channel: opened, consumerTag };
      reconnectDelay = firstReconnectDelay;
    } catch (error) {
      await opened.close().catch(() => undefined);
      throw error;
    }
  }

  return {
    async start() {
      try {
        await consume();
      } catch (error) {
        report(error, 'connect');
        scheduleReconnect();
        throw new Error(`Cannot consume queue "${options.queue}": ${describeAmqpError(error)}`, {
          cause: error,
        });
      }
    },
    async close() {
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      const open = channel;
      channel = undefined;
      if (open) await open.channel.cancel(open.consumerTag).catch(() => undefined);
      // Messages held for a retry are requeued now instead of after their delay.
      for (const entry of [...sleeping]) entry.wake();
      await Promise.allSettled([...inHand]);
      if (open) await open.channel.close().catch(() => undefined);
      await connection.close();
    },
    get consuming() {
      return channel !== undefined;
    },
  };
}
