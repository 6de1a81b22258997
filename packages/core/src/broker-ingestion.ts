import { isStoreUnavailable } from './errors.ts';
import type { RowId } from './messages.ts';

/**
 * One message as a broker adapter hands it to the inbox (RabbitMQ / Amazon MQ, Kafka / MSK, NATS JetStream),
 * already decoded from the transport's own encoding (base64, byte arrays).
 */
export interface BrokerMessage {
  /** The raw body bytes. */
  readonly body: Uint8Array;
  /** Application headers as text; names are compared without letter case (they are stored lower-cased). */
  readonly headers: Readonly<Record<string, string>>;
  /**
   * The transport's message id (the AMQP `message-id` property, NATS `Nats-Msg-Id`; Kafka has none): the
   * idempotency key when the source configures none, or when the configured location holds none.
   */
  readonly messageId?: string;
  /** The AMQP `type` property: the event type of a source with `eventTypeFromHeader: true`. Unused elsewhere. */
  readonly type?: string;
  /** The transport's correlation id (the AMQP `correlation-id` property), used when the configured location holds none. */
  readonly correlationId?: string;
  /**
   * The key to use when neither a configured location nor `messageId` gives one, e.g. Kafka's
   * `topic:partition:offset@timestamp` or NATS's `stream:sequence@stored` (the time the server stored it): stable across
   * redeliveries of the same message.
   */
  readonly defaultIdempotencyKey?: string;
  /**
   * True when the broker will not deliver this message again should this delivery fail (a JetStream consumer's
   * `max_deliver` reached): a failure other than a database outage then stores it as a dead row at once, instead of
   * leaving the broker to drop it unstored.
   */
  readonly lastDelivery?: boolean;
}

/** What became of one broker message. Every status means "committed": the adapter acknowledges the delivery. */
export interface BrokerIngestResult {
  /** `stored`: a new pending row; `duplicate`: (source, key) already stored, in any state; `dead`: a new dead row. */
  readonly status: 'stored' | 'duplicate' | 'dead';
  /** The row: the new one, or the one that was already there. */
  readonly id: RowId;
  /** Why the row is dead (status `dead` only). */
  readonly reason?: string;
  /** True for a new row of a push source while the relay is enabled: the caller may wake the relay. */
  readonly wakeRelay: boolean;
}

/**
 * The inbox as a broker adapter sees it: the port the RabbitMQ, Kafka and NATS sources call for every delivery.
 * `createBrokerIngestion` of `@queuebox/inbox` implements it; adapters depend on this port only, never on the inbox.
 */
export interface BrokerIngestionPort {
  /**
   * Stores one message of the broker source `sourceName`. Resolves only once the row is committed, so the adapter
   * acknowledges the delivery after it resolves and never when it rejects (StoreUnavailableError when the database
   * is unreachable: requeue, do not commit the offset, nak).
   */
  ingest(sourceName: string, message: BrokerMessage): Promise<BrokerIngestResult>;
}

/** What a batch of broker messages (one Lambda event) came to. */
export interface BrokerBatchReport {
  readonly stored: number;
  readonly duplicate: number;
  readonly dead: number;
  /** True when at least one new row belongs to a push source (wake the relay). */
  readonly wakeRelay: boolean;
}

/**
 * Ingests a batch one delivery after another, in the batch's order (a Lambda event source acknowledges the whole
 * batch, so order and all-or-retry matter more than speed), and counts the outcomes. `sourceOf` names the source of
 * each delivery and throws for one no source consumes. The first failure rejects, so the invocation fails and the
 * broker redelivers the batch; what was already stored comes back as duplicates. With `goOnAfterFailures` (where
 * the order of the batch need not be kept, as on a RabbitMQ queue), a failure other than an outage does not stop the
 * batch: the others are stored, then the first failure rejects, so a message that fails holds no other back and the
 * broker's redeliveries of the batch find the others stored (a delivery limit that then drops them loses nothing).
 */
export async function ingestInOrder<D extends { readonly message: BrokerMessage }>(
  ingestion: BrokerIngestionPort,
  deliveries: Iterable<D>,
  sourceOf: (delivery: D) => string,
  onIngested?: (result: BrokerIngestResult, delivery: D) => void,
  options: { readonly goOnAfterFailures?: boolean } = {},
): Promise<BrokerBatchReport> {
  const counts = { stored: 0, duplicate: 0, dead: 0 };
  let wakeRelay = false;
  let failed: { readonly error: unknown } | undefined;
  for (const delivery of deliveries) {
    let result: BrokerIngestResult;
    try {
      result = await ingestion.ingest(sourceOf(delivery), delivery.message);
    } catch (error) {
      // An outage fails every message alike: stop at once.
      if (!options.goOnAfterFailures || isStoreUnavailable(error)) throw error;
      failed ??= { error };
      continue;
    }
    counts[result.status] += 1;
    wakeRelay ||= result.wakeRelay;
    onIngested?.(result, delivery);
  }
  if (failed !== undefined) throw failed.error;
  return { ...counts, wakeRelay };
}
