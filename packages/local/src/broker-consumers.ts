import { createSqsConsumer } from '@queuebox/aws';
import type { QueueBoxConfig } from '@queuebox/config';
import type { BrokerIngestionPort, BrokerIngestResult, LogThrottle } from '@queuebox/core';
import { createLogThrottle, errorFields } from '@queuebox/core';
import { createKafkaConsumer, type KafkaConsumer, KafkaGroupInUseError } from '@queuebox/kafka';
import { createNatsSource, NatsDurableInUseError } from '@queuebox/nats';
import { createRabbitMqConsumer, RabbitMqConsumerCancelledError } from '@queuebox/rabbitmq';
import type { Logger } from './logger.ts';

/** What {@link startBrokerConsumers} works with. */
export interface BrokerConsumersDeps {
  /** The configured sources; the amqp, kafka, nats and sqs ones are consumed. */
  readonly sources: QueueBoxConfig['sources'];
  /** Where every message goes (`services.brokerIngestion`). */
  readonly ingestion: BrokerIngestionPort;
  readonly logger: Logger;
  /** Told after each committed message (e.g. to count it and wake the relay). */
  readonly onIngested?: (source: string, result: BrokerIngestResult) => void;
  /**
   * Told the source's failures in a row after each failure, and 0 when a message is stored after some, or when the
   * consumer works again without one (RabbitMQ consuming again, a NATS pull without a failure), unless its failures
   * were the database's.
   */
  readonly onFailures?: (source: string, failures: number) => void;
  /** Throttles the lines of dead messages (one a minute per source, then a count). Default a throttle of its own. */
  readonly logThrottle?: LogThrottle;
  /** First pause before a Kafka consumer that could not join its group tries again; doubles up to 30 s. Default 1000 ms. */
  readonly kafkaRetryDelayMs?: number;
  /**
   * The store's install id (`store.installId`): Kafka members and NATS durables say which install they belong to,
   * and a group or durable of another install is refused (see @queuebox/kafka and @queuebox/nats).
   */
  readonly installId?: () => Promise<string>;
  /**
   * Within a run of failures, the problem line is written again once this long has passed since the last one (as
   * well as at every 20th failure). Default 60000 ms.
   */
  readonly problemLogIntervalMs?: number;
}

/** Default of {@link BrokerConsumersDeps.problemLogIntervalMs}. */
export const DEFAULT_PROBLEM_LOG_INTERVAL_MS = 60_000;

/** The long-lived consumers of the broker sources. */
export interface BrokerConsumers {
  /** Names of the sources being consumed (amqp, kafka, nats and sqs). */
  readonly sources: readonly string[];
  /**
   * Stops consuming: no new delivery is taken; deliveries in hand are stored and acknowledged (RabbitMQ acks,
   * Kafka commits, JetStream acks), then the connections close. Resolves when all did; never rejects.
   */
  stop(): Promise<void>;
}

interface RunningConsumer {
  readonly source: string;
  stop(): Promise<void>;
}

const MAX_KAFKA_RETRY_DELAY_MS = 30_000;

/**
 * Starts one long-lived consumer per broker source of the configuration, as the local runtime's counterpart of
 * the amqp-source, kafka-source and nats-source-tick functions: RabbitMQ (`createRabbitMqConsumer`: prefetch,
 * ack after the inbox row committed, reconnects by itself), Kafka (`createKafkaConsumer`: a consumer-group member
 * that commits after the rows committed; a member that cannot join at start is rebuilt and tried again with a
 * growing pause), NATS JetStream (`createNatsSource(...).run(signal)`: durable pull consumer, ack after commit),
 * SQS (`createSqsConsumer(...).run(signal)`: long polls, deletes each message after its row committed).
 * Each message is ingested through `ingestion`, so the same rules (dead rows for bodies that are not JSON or that
 * the transform rejects) apply as on AWS. Nothing here fails the start: a broker that is down is logged and retried.
 */
export function startBrokerConsumers(deps: BrokerConsumersDeps): BrokerConsumers {
  const running: RunningConsumer[] = [];
  const firstKafkaDelay = deps.kafkaRetryDelayMs ?? 1000;

  for (const [name, source] of Object.entries(deps.sources)) {
    if (source.type === 'http') continue;
    const log = deps.logger.child({ component: 'consumer', source: name, type: source.type });
    // One line when the trouble starts, then every 20th and at least once a minute while it lasts (a Kafka source
    // retrying with pauses growing to 30 s wrote its first line and then nothing for minutes: an outside crash soak
    // saw 8 failures over 2.5 min and one line), instead of one per retry.
    let failures = 0;
    let loggedAt = 0;
    const logInterval = deps.problemLogIntervalMs ?? DEFAULT_PROBLEM_LOG_INTERVAL_MS;
    // The last failure was an ingest's (the database): consuming again after a reconnect does not end that.
    let ingestFailing = false;
    const onError = (error: unknown, context: { readonly during: string }) => {
      failures += 1;
      if (context.during === 'ingest') ingestFailing = true;
      deps.onFailures?.(name, failures);
      // A broker's cancel of the consumer (its queue deleted) is logged every time, even inside a run of failures.
      // A group or durable of another install: the source is refused until it has one of its own (ERROR).
      const refused = error instanceof KafkaGroupInUseError || error instanceof NatsDurableInUseError;
      const now = Date.now();
      if (
        failures === 1 ||
        failures % 20 === 0 ||
        now - loggedAt >= logInterval ||
        error instanceof RabbitMqConsumerCancelledError
      ) {
        loggedAt = now;
        (refused ? log.error : log.warn).call(log, 'broker consumer problem; it retries by itself', {
          during: context.during,
          failures,
          error: errorFields(error),
        });
      }
    };
    // A poison message became a dead row without a word at INFO (an outside audit): one WARN a minute per source, then
    // a count with the first ids.
    const deadLines = deps.logThrottle ?? createLogThrottle();
    const onIngested = (result: BrokerIngestResult) => {
      if (failures > 0) {
        log.info('broker consumer recovered', { failures });
        deps.onFailures?.(name, 0);
      }
      failures = 0;
      ingestFailing = false;
      log.debug('broker message stored', { status: result.status, id: result.id });
      // Its reason (which may quote the message: a transform's error) stays in the row's last_error, not the log.
      if (result.status === 'dead') {
        deadLines.line(
          `broker-dead:${name}`,
          (extra) =>
            log.warn('broker message stored dead (read its last_error through the admin API)', {
              id: result.id,
              ...extra,
            }),
          result.id,
        );
      }
      deps.onIngested?.(name, result);
    };
    const common = { source: name, ingestion: deps.ingestion, onIngested, onError };
    // The broker works again: healthy until the next failure, messages or not; unless its deliveries wait for the
    // database, which only a stored message ends.
    const onConsuming = () => {
      if (failures === 0 || ingestFailing) return;
      log.info('broker consumer recovered', { failures });
      failures = 0;
      deps.onFailures?.(name, 0);
    };

    if (source.type === 'amqp') {
      const consumer = createRabbitMqConsumer({
        ...source,
        ...common,
        // Consuming again (after a reconnect, a cancel).
        onConsuming,
      });
      consumer.start().then(
        () => log.info('consuming', { queue: source.queue }),
        // start() keeps reconnecting in the background after a failed first connect.
        () => {},
      );
      running.push({ source: name, stop: () => consumer.close() });
    } else if (source.type === 'kafka') {
      let stopped = false;
      let current: KafkaConsumer | undefined;
      let timer: NodeJS.Timeout | undefined;
      let delay = firstKafkaDelay;
      let wakeSleeper: (() => void) | undefined;
      const attempt = async (): Promise<void> => {
        while (!stopped) {
          let consumer: KafkaConsumer | undefined;
          try {
            // Read by each attempt: a store not answering yet fails the attempt, which is tried again.
            const installId = await deps.installId?.();
            if (stopped) return;
            consumer = createKafkaConsumer({
              ...source,
              ...common,
              logger: log,
              ...(installId === undefined ? {} : { installId }),
            });
            current = consumer;
            await consumer.start();
            log.info('consuming', { topics: source.topics, groupId: source.groupId });
            return;
          } catch (error) {
            onError(error, { during: 'connect' });
            current = undefined;
            await consumer?.close().catch(() => undefined);
          }
          await new Promise<void>((resolve) => {
            wakeSleeper = resolve;
            timer = setTimeout(resolve, delay);
          });
          delay = Math.min(MAX_KAFKA_RETRY_DELAY_MS, delay * 2);
        }
      };
      const starting = attempt();
      running.push({
        source: name,
        async stop() {
          stopped = true;
          clearTimeout(timer);
          wakeSleeper?.();
          // Closing the member in hand also cuts a join that is still in progress short.
          const inHand = current;
          await inHand?.close().catch(() => undefined);
          await starting;
          if (current !== undefined && current !== inHand) await current.close().catch(() => undefined);
        },
      });
    } else if (source.type === 'sqs') {
      const sqs = createSqsConsumer({ ...source, ...common });
      const abort = new AbortController();
      log.info('consumer started', { queueUrl: source.queueUrl });
      const run = sqs.run(abort.signal);
      running.push({
        source: name,
        async stop() {
          abort.abort();
          // run() returns after the messages in hand were stored and deleted; the poll in flight is cut short.
          await run.catch(() => undefined);
          await sqs.close().catch(() => undefined);
        },
      });
    } else {
      // A pull without a failure: on a stream without traffic nothing else would end a NATS outage's failures.
      const nats = createNatsSource({
        ...source,
        ...common,
        onConsuming,
        logger: log,
        ...(deps.installId === undefined ? {} : { installId: deps.installId }),
      });
      const abort = new AbortController();
      log.info('consumer started', { stream: source.stream, durable: source.durable });
      const run = nats.run(abort.signal);
      running.push({
        source: name,
        async stop() {
          abort.abort();
          // run() returns after the fetch in hand was stored and acked (during a store outage: given back with a nak).
          await run.catch(() => undefined);
          await nats.close().catch(() => undefined);
        },
      });
    }
  }

  let stopping: Promise<void> | undefined;
  return {
    sources: running.map((r) => r.source),
    stop() {
      stopping ??= Promise.allSettled(running.map((r) => r.stop())).then(() => undefined);
      return stopping;
    },
  };
}
