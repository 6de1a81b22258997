import { createHash } from 'node:crypto';
import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage } from '@queuebox/core';
import { isStoreUnavailable, isTransientConflict, QueueBoxError } from '@queuebox/core';
import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { DEFAULT_DELIVERY_LIMIT, headersText, withLastDelivery } from './amqp-headers.ts';
import { isLosslessProperties } from './amqp-lossless.ts';
import {
  type AmqpConnection,
  boundedClose,
  CLOSE_HANDSHAKE_MS,
  createAmqpConnection,
  describeAmqpError,
} from './connection.ts';

const noop = () => undefined;

/** `sources.<name>` of `type: amqp`, the fields the consumer reads (the validated configuration fits). */
export interface AmqpSourceOptions {
  /** Broker URL, `amqp://` or `amqps://`. */
  readonly url: string;
  /** The queue to consume; it must exist (the consumer declares nothing). */
  readonly queue: string;
  /** Unacknowledged messages in flight. Default 10. */
  readonly prefetch?: number;
  /**
   * The queue's delivery-limit (a quorum queue drops or dead-letters a message whose failed deliveries pass it): a
   * message whose `x-delivery-count` reached it is on its last delivery, and a failure other than an outage makes it a
   * dead row at once (`lastDelivery`). Default 20, RabbitMQ 4.x's default.
   */
  readonly deliveryLimit?: number;
}

/** Options of the long-lived consumer. */
export interface RabbitMqConsumerOptions extends AmqpSourceOptions {
  /** The source's name: what `ingest` is called with. */
  readonly source: string;
  readonly ingestion: BrokerIngestionPort;
  /**
   * The first pause before a delivery whose ingestion failed is tried again in process, doubling up to
   * `maxRetryDelayMs`; the delivery stays unacknowledged meanwhile. Database unavailable (core's
   * `StoreUnavailableError`, also as a cause) or refusing for the moment (`waitsForDatabase`: a lock or statement
   * timeout, a deadlock, a full disk): the deliveries after it wait behind it. Any other ingestion error (a
   * poison message): it is tried again on its own, the others go on. Default 1000 ms.
   */
  readonly retryDelayMs?: number;
  /** The longest pause between two tries of a delivery. Default 30000 ms. */
  readonly maxRetryDelayMs?: number;
  /** First delay before reconnecting after the connection or channel broke; doubles up to 30 s. Default 500 ms. */
  readonly reconnectDelayMs?: number;
  /** Called after each committed message (e.g. to wake the relay). */
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  /** Called each time a channel starts consuming: at start and after every reconnect (e.g. to clear a failing state). */
  readonly onConsuming?: () => void;
  /**
   * Called with every failure: ingestion errors (each try during a database outage), connection losses, reconnect
   * attempts, the broker's cancel of the consumer (a {@link RabbitMqConsumerCancelledError}), and the refusal of a
   * stream queue (a {@link RabbitMqStreamQueueError}, after which the consumer stops for good) (for logs).
   */
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
const MAX_RETRY_DELAY_MS = 30_000;

/**
 * Whether an ingestion error is the database's, not the message's: unavailable (core's `StoreUnavailableError`), or
 * a statement it refused for the moment (core's `isTransientConflict`, which the stores set for the codes they know
 * to pass: a deadlock, a serialization failure, a lock or statement timeout, a full lock table). Such a delivery is
 * held, not requeued: a requeue counts a delivery of a quorum queue, and at its last one the dead row is refused for
 * the same moment and the broker drops the message unstored. Any other store error is the message's (tried on its
 * own, the others going on): "not refused for its values" alone held the whole queue behind an error that the
 * message itself causes on every try (review).
 */
export function waitsForDatabase(error: unknown): boolean {
  return isStoreUnavailable(error) || isTransientConflict(error);
}

/**
 * Tries of a delivery that failed with a momentary refusal (`isTransientConflict`, not an outage), counted over its
 * whole stay in this consumer, before it is taken for the message's own problem and tried on its own, never holding
 * the queue again: with the held deliveries' delays (1 s doubling to 30 s), about two minutes. A statement timeout
 * can be the message's (a payload too large to insert within it), and it must not hold the queue without end. Past
 * them, the message may be stored after deliveries that came behind it.
 */
export const MAX_CONFLICT_HOLD_TRIES = 8;

/** How many messages the consumer remembers the momentary refusals of (`MAX_CONFLICT_HOLD_TRIES`). */
const CONFLICT_MEMORY = 10_000;

/** The header RabbitMQ puts on every delivery of a stream queue (its offset in the stream). */
const STREAM_OFFSET_HEADER = 'x-stream-offset';

/** Whether a delivery may come from a stream queue: every delivery of a stream carries `x-stream-offset`. */
function mayBeStreamDelivery(delivery: ConsumeMessage): boolean {
  const headers: unknown = delivery.properties.headers;
  return typeof headers === 'object' && headers !== null && Object.hasOwn(headers, STREAM_OFFSET_HEADER);
}

/**
 * Whether `queue` is a stream queue, asked on a connection of its own without taking a message: a queue that reports
 * ready messages (`queue.declare` passive) is none, since a stream reports 0; one that reports none is asked for one
 * with `basic.get`, which a stream refuses by closing the connection (540 NOT_IMPLEMENTED) and any other queue answers
 * empty. A message that arrived in between is given back at once (requeued: on a quorum queue that counts one
 * delivery of it, in that instant's race only; the review of the first version, which got a message from a queue
 * with ready ones, had the broker drop one at its delivery limit). The header alone does not tell: a producer can
 * set it, and a shovel from a stream copies it onto the messages of a classic queue, whose consumer must not stop.
 * Undefined when the question could not be put (the broker away, an exclusive queue).
 */
async function isStreamQueue(url: string, source: string, queue: string): Promise<boolean | undefined> {
  const probe = createAmqpConnection({ url, connectionName: `queuebox consumer ${source} (stream check)` });
  let channel: Channel | undefined;
  try {
    channel = await probe.openChannel();
    if ((await channel.checkQueue(queue)).messageCount > 0) {
      await channel.close();
      return false;
    }
    const got = await channel.get(queue, { noAck: false });
    if (got !== false) channel.nack(got, false, true);
    await channel.close();
    return false;
  } catch (error) {
    // amqplib fails the get with a bare "Channel ended"; the connection's close says why, a turn later.
    await new Promise((resolve) => setImmediate(resolve));
    const reason = channel === undefined ? undefined : probe.closeReason(channel);
    return /NOT[-_]IMPLEMENTED/.test(`${describeAmqpError(reason)} ${describeAmqpError(error)}`)
      ? true
      : undefined;
  } finally {
    await probe.close().catch(() => undefined);
  }
}

/** How long a stream check that could not be put is not put again (each opens a connection). */
const STREAM_CHECK_RETRY_MS = 60_000;

/**
 * The broker cancelled the consumer (AMQP `basic.cancel`): the queue was deleted (and maybe declared again), or a
 * quorum queue's leader moved, or a mirrored queue failed over. The channel stays open, so the consumer closes it and
 * consumes again through its reconnect path.
 */
export class RabbitMqConsumerCancelledError extends QueueBoxError {}

/**
 * The source's queue is a stream queue (`x-queue-type: stream`), which the consumer refuses: it consumes from "next"
 * on every (re)connect (what arrived while it was away is skipped), and a stream refuses a `nack` by closing the
 * connection (540 NOT_IMPLEMENTED). Reported once; the consumer stops consuming that queue for good.
 */
export class RabbitMqStreamQueueError extends QueueBoxError {}

/**
 * A delivery's message-id was decoded by amqplib with U+FFFD while the lossless decoding was unavailable (see
 * `installLosslessDecoding`): it is not used as the idempotency key (reported, `during: 'consume'`).
 */
export class LossyMessageIdError extends QueueBoxError {}

/** A delivery whose ingestion waits for the database: unacknowledged, in delivery order. */
interface Held {
  readonly on: Channel;
  readonly delivery: ConsumeMessage;
  readonly message: BrokerMessage;
  /** Resolves the delivery's handling: it was settled, or it is left to the broker. */
  readonly release: () => void;
}

/**
 * The long-lived consumer of an AMQP source for the local runtime. Each delivery is handed to the broker
 * ingestion and acknowledged only after it resolved, i.e. after the inbox row (pending or dead) committed. At most
 * `prefetch` deliveries are in hand at once.
 *
 * When ingestion fails because the database is unavailable, or refused the statement for the moment rather than for
 * the row's values (`waitsForDatabase`), the delivery is neither acked
 * nor nacked: a requeue would count a delivery attempt, and a quorum queue's delivery limit would drop or
 * dead-letter the message during a long enough outage. It is held and its ingestion tried again in process, after
 * `retryDelayMs` doubling up to `maxRetryDelayMs`; every delivery after it waits behind it (the ones in hand and
 * the ones still arriving, which `prefetch` bounds), and once the database answers they are ingested one after
 * the other, in delivery order, before deliveries are ingested side by side again. Any other ingestion error (a
 * bug, a poison message) keeps that delivery too, unacknowledged, and tries it again on its own with the same
 * growing delay while the other deliveries go on: a requeue would bring it straight back for ever, and count a
 * delivery each time.
 *
 * When the connection or the channel breaks (the broker's consumer timeout during a very long outage included),
 * unacknowledged deliveries return to the queue (the broker does that), the held ones are dropped, and the
 * consumer reconnects with a growing delay until `close()`; the database outage's back-off goes on. When the
 * broker cancels the consumer (`basic.cancel`: the queue was deleted, a quorum leader moved), that is reported,
 * the deliveries being ingested are settled, and the channel is closed so the same reconnect path consumes again.
 * A delivery on its broker's last delivery (`lastDelivery`) is never nacked: a requeue would have the broker drop
 * it unstored. A stream queue is refused at its first delivery (`RabbitMqStreamQueueError`): nothing acked or
 * nacked, the consumer stops without reconnecting.
 */
/**
 * Longest time a poison message is kept and tried on its own before it is requeued: well within RabbitMQ's
 * `consumer_timeout` (30 min by default), which closes a channel that keeps a delivery unacknowledged longer.
 */
const MAX_POISON_KEEP_MS = 10 * 60_000;

export function createRabbitMqConsumer(options: RabbitMqConsumerOptions): RabbitMqConsumer {
  const retryDelayMs = options.retryDelayMs ?? 1000;
  const maxRetryDelayMs = Math.max(retryDelayMs, options.maxRetryDelayMs ?? MAX_RETRY_DELAY_MS);
  const firstReconnectDelay = options.reconnectDelayMs ?? 500;
  const connection: AmqpConnection = createAmqpConnection({
    url: options.url,
    connectionName: `queuebox consumer ${options.source}`,
    // Message-ids whose bytes are not UTF-8 stay distinct keys (`base64:…`), int64 headers exact (amqp-lossless.ts).
    losslessDecoding: true,
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
  /** Set when the queue turned out to be a stream: the consumer stopped for good (see refuseStream). */
  let refused: RabbitMqStreamQueueError | undefined;
  /** Whether the queue is a stream, asked once a delivery carries `x-stream-offset` (see isStreamQueue). */
  let streamCheck: Promise<boolean | undefined> | undefined;
  /** The channel consuming right now. */
  let channel: { readonly channel: Channel; readonly consumerTag: string } | undefined;
  /** Every channel opened and not closed yet (the consuming one, and one whose consumer the broker cancelled). */
  const openChannels = new Set<Channel>();
  /** Channels whose consumer the broker cancelled: nothing more is held on them. */
  const cancelledChannels = new WeakSet<Channel>();
  let reconnectTimer: NodeJS.Timeout | undefined;
  let reconnectDelay = firstReconnectDelay;
  const inHand = new Set<Promise<void>>();
  const sleeping = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();
  /** Deliveries waiting for the database, oldest first (per channel in delivery-tag order). */
  const held: Held[] = [];
  /**
   * Per message, its tries that the database refused for the moment (`isTransientConflict`), over all its
   * deliveries: past MAX_CONFLICT_HOLD_TRIES such a refusal is its own problem and never holds the queue again.
   * Counted per hold, a message refused on every try went back to a fresh hold from its own retries (about 2 minutes
   * each), and the queue stalled behind it without end (review of 18ec9b0); counted per delivery, it held the queue
   * for 2 minutes again after each requeue of a poison message, every 12 minutes (review of b6bf29f). A message is
   * known by its message-id and the hash of its body (`failureKey`'s rule); the map forgets the oldest past
   * `CONFLICT_MEMORY` messages.
   */
  const conflictTries = new Map<string, number>();
  /**
   * Whether a failed ingestion of `delivery` waits for the database (held, the queue waiting with it): an outage
   * always; a momentary refusal (counted) until the message has had MAX_CONFLICT_HOLD_TRIES of them.
   */
  const holdsFor = (delivery: ConsumeMessage, error: unknown): boolean => {
    if (isStoreUnavailable(error)) return true;
    if (!isTransientConflict(error)) return false;
    const id = delivery.properties.messageId;
    const message = `${typeof id === 'string' ? id : ''}\u0000${createHash('sha256').update(delivery.content).digest('base64')}`;
    const tries = (conflictTries.get(message) ?? 0) + 1;
    conflictTries.delete(message);
    conflictTries.set(message, tries);
    if (conflictTries.size > CONFLICT_MEMORY) {
      const oldest = conflictTries.keys().next().value;
      if (oldest !== undefined) conflictTries.delete(oldest);
    }
    return tries < MAX_CONFLICT_HOLD_TRIES;
  };
  /** The last ingestion failed because the database is unavailable (and none succeeded since). */
  let storeDown = false;
  /** Deliveries kept for their own retries (`retryOnItsOwn`): at most `poisonSlots`, one prefetch slot left free. */
  let keptPoison = 0;
  const poisonSlots = Math.max(0, (options.prefetch ?? 10) - 1);
  /** The next pause of the outage's back-off. */
  let outageDelay = retryDelayMs;
  let retrying = false;

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

  function acknowledge(
    on: Channel,
    delivery: ConsumeMessage,
    result: BrokerIngestResult,
    message: BrokerMessage,
  ) {
    try {
      on.ack(delivery);
    } catch {
      // The channel is gone: the broker requeued the delivery, and its redelivery is stored as a duplicate.
    }
    try {
      options.onIngested?.(result, message);
    } catch {
      // A hook must not undo a committed message.
    }
  }

  /**
   * A failure that is no outage, most likely this message's own (a poison message: a transform function's bug on
   * its payload): the delivery is kept, unacknowledged, and its ingestion tried again in process after
   * `retryDelayMs`, doubling up to `maxRetryDelayMs`, on its own: the other deliveries go on meanwhile. A requeue
   * (as before) put it back at the head of the queue, so it came straight back, every `retryDelayMs` for ever, and
   * each requeue counted a delivery: a quorum queue's delivery limit dropped it, unstored. Resolves once it was
   * settled, or left to the broker (its channel closed, the consumer closing); joins the hold when the database
   * goes away meanwhile.
   */
  async function retryOnItsOwn(on: Channel, delivery: ConsumeMessage, message: BrokerMessage): Promise<void> {
    let delay = retryDelayMs;
    const keptUntil = Date.now() + MAX_POISON_KEEP_MS;
    for (;;) {
      await pause(delay);
      delay = Math.min(maxRetryDelayMs, delay * 2);
      // Closing, or the channel gone (the broker returned the delivery), or the broker cancelled the consumer.
      if (closed || !openChannels.has(on) || cancelledChannels.has(on)) return;
      // Kept long enough: the broker's consumer_timeout (30 min by default) would close the channel over it, and
      // return every delivery of the channel with it. Not on its last delivery: the broker would drop it unstored.
      if (Date.now() >= keptUntil && message.lastDelivery !== true) return requeueNow(on, delivery);
      if (storeDown || held.length > 0) return hold(on, delivery, message);
      let result: BrokerIngestResult;
      try {
        result = await options.ingestion.ingest(options.source, message);
      } catch (error) {
        report(error, 'ingest');
        if (holdsFor(delivery, error)) {
          storeDown = true;
          return hold(on, delivery, message);
        }
        continue;
      }
      acknowledge(on, delivery, result, message);
      return;
    }
  }

  /**
   * A failure that is no outage when `poisonSlots` deliveries are already kept for their own retries: held
   * `retryDelayMs` and `nack`ed with requeue (each such requeue counts a delivery). Kept, it would take the last
   * prefetch slot: with as many poison messages in hand as `prefetch`, the broker sends nothing more, and the queue
   * stalls behind them.
   */
  async function requeueLater(on: Channel, delivery: ConsumeMessage): Promise<void> {
    await pause(retryDelayMs);
    requeueNow(on, delivery);
  }

  function requeueNow(on: Channel, delivery: ConsumeMessage): void {
    try {
      on.nack(delivery, false, true);
    } catch {
      // The channel is gone: the broker requeued the delivery already.
    }
  }

  /** A poison message kept and tried on its own (`retryOnItsOwn`) while a prefetch slot is left for the others. */
  async function retryOrRequeue(
    on: Channel,
    delivery: ConsumeMessage,
    message: BrokerMessage,
  ): Promise<void> {
    // On its broker's last delivery it is kept whatever the slots: a requeue would have the broker drop it unstored.
    if (keptPoison >= poisonSlots && message.lastDelivery !== true) return requeueLater(on, delivery);
    keptPoison += 1;
    try {
      await retryOnItsOwn(on, delivery, message);
    } finally {
      keptPoison -= 1;
    }
  }

  /** Drops the held deliveries of `on` (all with none): they stay unacknowledged, so the broker returns them. */
  function releaseHeld(on?: Channel) {
    for (let i = held.length - 1; i >= 0; i--) {
      const entry = held[i];
      if (entry !== undefined && (on === undefined || entry.on === on)) {
        held.splice(i, 1);
        entry.release();
      }
    }
  }

  function unhold(entry: Held) {
    const at = held.indexOf(entry);
    if (at >= 0) held.splice(at, 1);
    entry.release();
  }

  /** Holds a delivery until the database answers; resolves once it was settled or left to the broker. */
  function hold(on: Channel, delivery: ConsumeMessage, message: BrokerMessage): Promise<void> {
    if (closed || !openChannels.has(on) || cancelledChannels.has(on)) return Promise.resolve();
    return new Promise<void>((release) => {
      // Deliveries in hand fail one after another in any order: keep the channel's delivery order.
      let at = held.length;
      for (; at > 0; at--) {
        const before = held[at - 1];
        if (before === undefined || before.on !== on) break;
        if (before.delivery.fields.deliveryTag < delivery.fields.deliveryTag) break;
      }
      held.splice(at, 0, { on, delivery, message, release });
      if (!retrying) {
        retrying = true;
        void retryHeld();
      }
    });
  }

  /** Ingests the held deliveries one after the other, oldest first, pausing with a growing delay while the database is unavailable. */
  async function retryHeld(): Promise<void> {
    try {
      while (held.length > 0 && !closed) {
        if (storeDown) {
          const delay = outageDelay;
          outageDelay = Math.min(maxRetryDelayMs, outageDelay * 2);
          await pause(delay);
        }
        const entry = held[0];
        if (entry === undefined || closed) break;
        let result: BrokerIngestResult;
        try {
          result = await options.ingestion.ingest(options.source, entry.message);
        } catch (error) {
          report(error, 'ingest');
          if (holdsFor(entry.delivery, error)) {
            storeDown = true;
            continue;
          }
          // The database answered (or refused this one for the moment too many times in a row): this message has a
          // problem of its own: it is tried again on its own.
          storeDown = false;
          outageDelay = retryDelayMs;
          const at = held.indexOf(entry);
          if (at >= 0) held.splice(at, 1);
          void retryOrRequeue(entry.on, entry.delivery, entry.message).then(entry.release);
          continue;
        }
        storeDown = false;
        outageDelay = retryDelayMs;
        acknowledge(entry.on, entry.delivery, result, entry.message);
        unhold(entry);
      }
    } finally {
      retrying = false;
      // On close, the held deliveries are left to the broker: closing the channel returns them.
      if (closed) releaseHeld();
    }
  }

  /**
   * The inbox message of a delivery; one whose header table cannot be read is stored without its headers (reported),
   * rather than throw in the delivery callback, which crashed the process, and again at every restart.
   */
  function messageOf(delivery: ConsumeMessage): BrokerMessage {
    let message: BrokerMessage;
    try {
      message = toBrokerMessage(delivery);
    } catch (error) {
      report(error, 'consume');
      message = toBrokerMessage({ ...delivery, properties: { ...delivery.properties, headers: {} } });
    }
    message = withoutLossyId(message, delivery);
    return withLastDelivery(
      message,
      options.deliveryLimit ?? DEFAULT_DELIVERY_LIMIT,
      delivery.fields.redelivered === true,
    );
  }

  /**
   * Only when amqplib decoded the delivery's properties (the lossless decoding could not be installed, reported at
   * connect): a message-id holding U+FFFD may have been bytes that are not UTF-8, and two such ids that differ only
   * there would be one idempotency key, the second message dropped as a duplicate. Such an id is not used: the
   * message is ingested as one without a message-id (a fresh key per delivery: at least once), and a
   * `LossyMessageIdError` is reported.
   */
  function withoutLossyId(message: BrokerMessage, delivery: ConsumeMessage): BrokerMessage {
    if (message.messageId === undefined || !message.messageId.includes('\uFFFD')) return message;
    if (isLosslessProperties(delivery.properties)) return message;
    report(
      new LossyMessageIdError(
        `the message-id of a delivery from queue "${options.queue}" was decoded with U+FFFD (bytes that are not ` +
          'UTF-8 may have been replaced): it is not used as the idempotency key; the message is stored under a ' +
          'key of its own, and a redelivery may be stored again',
        { context: { source: options.source, queue: options.queue, messageId: message.messageId } },
      ),
      'consume',
    );
    const { messageId: _lossy, ...rest } = message;
    return rest;
  }

  async function handle(on: Channel, delivery: ConsumeMessage): Promise<void> {
    const message = messageOf(delivery);
    // During an outage, and until the deliveries held by it are ingested, each delivery waits its turn.
    if (storeDown || held.length > 0) return hold(on, delivery, message);
    let result: BrokerIngestResult;
    try {
      result = await options.ingestion.ingest(options.source, message);
    } catch (error) {
      report(error, 'ingest');
      if (holdsFor(delivery, error)) {
        storeDown = true;
        return hold(on, delivery, message);
      }
      return retryOrRequeue(on, delivery, message);
    }
    acknowledge(on, delivery, result, message);
  }

  /** The broker cancelled the consumer of `on`: settle what is being ingested, then close it and consume again. */
  async function cancelled(on: Channel, mine: ReadonlySet<Promise<void>>): Promise<void> {
    if (channel?.channel === on) channel = undefined;
    cancelledChannels.add(on);
    report(
      new RabbitMqConsumerCancelledError(
        `RabbitMQ cancelled the consumer of queue "${options.queue}" (the queue was deleted, or its leader or master moved); consuming again`,
        { context: { source: options.source, queue: options.queue } },
      ),
      'consume',
    );
    // Deliveries waiting for the database are returned by the close; the ones being ingested are acked first.
    releaseHeld(on);
    await Promise.allSettled([...mine]);
    // The close handler schedules the reconnect.
    await on.close().catch(() => undefined);
  }

  /**
   * The queue turned out to be a stream (a delivery carries `x-stream-offset`): neither acked nor nacked (a stream
   * closes the connection over a nack, 540 NOT_IMPLEMENTED), the consumer stops for good (no reconnect: each would
   * consume from "next" again), and the refusal is reported once, `during: 'consume'`.
   */
  async function refuseStream(on: Channel, mine: ReadonlySet<Promise<void>>): Promise<void> {
    refused = new RabbitMqStreamQueueError(
      `queue "${options.queue}" is a stream queue, which QueueBox does not consume as a source: a stream is read ` +
        `from "next" at every (re)connect (what arrives meanwhile is skipped) and cannot take back a failed ` +
        `delivery (a nack closes the connection, 540 NOT_IMPLEMENTED); the consumer of source "${options.source}" ` +
        `stopped. Consume a classic or quorum queue bound to the stream's exchange instead`,
      { context: { source: options.source, queue: options.queue } },
    );
    if (channel?.channel === on) channel = undefined;
    cancelledChannels.add(on);
    if (reconnectTimer) clearTimeout(reconnectTimer);
    reconnectTimer = undefined;
    report(refused, 'consume');
    releaseHeld(on);
    await Promise.allSettled([...mine]);
    await on.close().catch(() => undefined);
  }

  function scheduleReconnect() {
    if (closed || refused !== undefined || reconnectTimer) return;
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
    if (closed || refused !== undefined) return;
    const model: ChannelModel = await connection.connection();
    const opened = await model.createChannel();
    openChannels.add(opened);
    /** The deliveries of this channel in hand. */
    const mine = new Set<Promise<void>>();
    let cancelling = false;
    try {
      opened.on('error', (error: Error) => report(error, 'consume'));
      opened.on('close', () => {
        openChannels.delete(opened);
        if (channel?.channel === opened) channel = undefined;
        releaseHeld(opened);
        scheduleReconnect();
      });
      await opened.prefetch(options.prefetch ?? 10);
      const { consumerTag } = await opened.consume(
        options.queue,
        (delivery) => {
          if (delivery === null) {
            // basic.cancel from the broker: amqplib leaves the channel open, so nothing else would reconnect.
            if (!cancelling) {
              cancelling = true;
              void cancelled(opened, mine);
            }
            return;
          }
          // A stream queue: refused at its first delivery, and nothing of it is handled, acked or nacked.
          if (refused !== undefined) return;
          const handled = mayBeStreamDelivery(delivery)
            ? (async () => {
                streamCheck ??= isStreamQueue(options.url, options.source, options.queue).then((answer) => {
                  // Asked again a minute later when the broker could not be asked (not at every such delivery).
                  if (answer === undefined) {
                    setTimeout(() => {
                      streamCheck = undefined;
                    }, STREAM_CHECK_RETRY_MS).unref();
                  }
                  return answer;
                });
                if ((await streamCheck) !== true) return handle(opened, delivery);
                if (!cancelling) {
                  cancelling = true;
                  void refuseStream(opened, mine);
                }
              })()
            : handle(opened, delivery);
          const handling = handled.finally(() => {
            inHand.delete(handling);
            mine.delete(handling);
          });
          inHand.add(handling);
          mine.add(handling);
        },
        { noAck: false },
      );
      if (closed) {
        await opened.close().catch(() => undefined);
        return;
      }
      if (!cancelling && refused === undefined) {
        channel = { channel: opened, consumerTag };
        options.onConsuming?.();
      }
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
      // Each step waits for the broker's answer, which a half-open connection never sends (before, close waited for
      // two missed heartbeats): bounded, and the connection's own close destroys its socket after its bound.
      const answered =
        open === undefined ||
        (await boundedClose(open.channel.cancel(open.consumerTag), CLOSE_HANDSHAKE_MS, noop));
      // Messages waiting for their next try, or for the database, are left unacknowledged: closing the channel
      // returns them to the queue.
      for (const entry of [...sleeping]) entry.wake();
      releaseHeld();
      await Promise.allSettled([...inHand]);
      // A connection that did not answer the cancel will not answer channel closes either: left to its own close.
      if (answered) {
        await boundedClose(
          Promise.allSettled([...openChannels].map((c) => c.close())),
          CLOSE_HANDSHAKE_MS,
          noop,
        );
      }
      await connection.close();
    },
    get consuming() {
      return channel !== undefined;
    },
  };
}
