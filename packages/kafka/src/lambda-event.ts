import type {
  BrokerBatchReport,
  BrokerIngestionPort,
  BrokerIngestResult,
  BrokerMessage,
} from '@queuebox/core';
import {
  brokerHeaderBytesText,
  ConfigError,
  isStoreUnavailable,
  QueueBoxError,
  UnexpectedEventError,
} from '@queuebox/core';
import type { MSKEvent, SelfManagedKafkaEvent } from 'aws-lambda';
import { recordKey, withKafkaKey } from './records.ts';

/** The event of an MSK or a self-managed Kafka event source mapping (`@types/aws-lambda`). */
export type KafkaLambdaEvent = MSKEvent | SelfManagedKafkaEvent;

/** One decoded record. */
export interface KafkaDelivery {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly message: BrokerMessage;
}

/**
 * The records of an MSK / self-managed Kafka event, in the event's order (by `topic-partition`, then offset):
 * `value` base64-decoded (absent → empty body), header byte arrays decoded as UTF-8, or kept as `base64:…` when they
 * are not storable text (core's `brokerHeaderBytesText`; a repeated header joined with `, `), and `topic:partition:offset@timestamp` as the default idempotency key. The record key, base64-decoded, is the
 * header `x-kafka-key` (see `withKafkaKey`): Lambda leaves `key` out for a record without one, which then has no such
 * header; `""` is an empty key. Pure.
 */
export function kafkaDeliveries(event: KafkaLambdaEvent): KafkaDelivery[] {
  const byPartition: unknown = event?.records;
  const source: unknown = event?.eventSource;
  if (
    (source !== 'aws:kafka' && source !== 'SelfManagedKafka') ||
    typeof byPartition !== 'object' ||
    byPartition === null ||
    Array.isArray(byPartition) ||
    !Object.values(byPartition).every((records) => Array.isArray(records))
  ) {
    // Another event wired to kafka-source, answered with success, would have its records committed unstored.
    throw new UnexpectedEventError(
      `Not an MSK or self-managed Kafka event (eventSource ${JSON.stringify(source ?? null)}, expected "aws:kafka" or "SelfManagedKafka" with records): nothing was stored, and the invocation fails so the records are not committed`,
      { context: { eventSource: source ?? null } },
    );
  }
  const deliveries: KafkaDelivery[] = [];
  for (const records of Object.values(byPartition as KafkaLambdaEvent['records'])) {
    for (const record of records) {
      const headers: Record<string, string> = {};
      for (const entry of record.headers ?? []) {
        for (const [name, bytes] of Object.entries(entry)) {
          if (name === '__proto__') continue;
          const text = brokerHeaderBytesText(Uint8Array.from(bytes ?? []));
          headers[name] = headers[name] === undefined ? text : `${headers[name]}, ${text}`;
        }
      }
      // `key` is absent for a record without a key, though the type says otherwise.
      const key: unknown = record.key;
      deliveries.push({
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        message: {
          body: record.value ? Buffer.from(record.value, 'base64') : new Uint8Array(),
          headers: withKafkaKey(headers, typeof key === 'string' ? Buffer.from(key, 'base64') : null),
          defaultIdempotencyKey: recordKey(record.topic, record.partition, record.offset, record.timestamp),
        },
      });
    }
  }
  return deliveries;
}

/** No configured Kafka source consumes the topic of a record. */
export class UnmappedTopicError extends QueueBoxError {}

/** The sources slice the handler reads: Kafka sources by name with their topics. */
export type KafkaSourcesByName = Readonly<
  Record<string, { readonly type: string; readonly topics?: readonly string[] }>
>;

/** Options of the Lambda handler. */
export interface KafkaEventHandlerOptions {
  readonly ingestion: BrokerIngestionPort;
  /** `sources`: each record goes to the Kafka source that lists its topic. */
  readonly sources: KafkaSourcesByName;
  /**
   * The source every record of this function belongs to (one event source mapping per source), e.g. from an
   * environment variable set by infra/. Required when two Kafka sources list the same topic. Default: by topic.
   */
  readonly source?: string;
  readonly onIngested?: (result: BrokerIngestResult, delivery: KafkaDelivery) => void;
  /**
   * Answer the records that failed as `batchItemFailures` instead of failing the invocation. Only for an event source
   * mapping with `FunctionResponseTypes: [ReportBatchItemFailures]`, which Lambda offers for Kafka in provisioned
   * mode only (provisioned pollers are billed while idle): a mapping without it reads the answer as a success and
   * commits every record of the batch, the failed ones unstored. Default false.
   */
  readonly reportBatchItemFailures?: boolean;
}

/**
 * A record Lambda is to deliver again, in the shape of Kafka's partial batch response: the `topic-partition` key of
 * the event's `records` and the offset of the first record of that partition not stored. Lambda resumes the
 * partition from it.
 */
export interface KafkaBatchItemFailure {
  readonly itemIdentifier: { readonly partition: string; readonly offset: number };
}

/**
 * What one event came to. `batchItemFailures` is there only with `reportBatchItemFailures` (empty when every record
 * was stored).
 */
export interface KafkaEventReport extends BrokerBatchReport {
  readonly batchItemFailures?: readonly KafkaBatchItemFailure[];
}

/** The Kafka source of each topic; a topic listed by two sources needs an explicit `source`. */
export function sourcesByTopic(sources: KafkaSourcesByName): Map<string, string> {
  const byTopic = new Map<string, string>();
  const issues: { path: string; message: string }[] = [];
  for (const [name, source] of Object.entries(sources)) {
    if (source.type !== 'kafka') continue;
    for (const topic of source.topics ?? []) {
      const taken = byTopic.get(topic);
      if (taken !== undefined && taken !== name) {
        issues.push({
          path: `sources.${name}.topics`,
          message: `topic "${topic}" is also consumed by source ${taken}; give the handler its source explicitly`,
        });
      } else byTopic.set(topic, name);
    }
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return byTopic;
}

/** The deliveries by the `topic-partition` key of the event, each partition's in offset order. */
function byPartition(deliveries: readonly KafkaDelivery[]): Map<string, KafkaDelivery[]> {
  const partitions = new Map<string, KafkaDelivery[]>();
  for (const delivery of deliveries) {
    const key = `${delivery.topic}-${delivery.partition}`;
    const list = partitions.get(key);
    if (list) list.push(delivery);
    else partitions.set(key, [delivery]);
  }
  for (const list of partitions.values()) list.sort((a, b) => a.offset - b.offset);
  return partitions;
}

/**
 * The body of functions/kafka-source.ts: stores the records of an MSK or self-managed Kafka event through the broker
 * ingestion, each `topic-partition` on its own, in offset order. A record that fails (a transform function that
 * throws on it) stops its partition only: the records after it in that partition are left for the retry, so the
 * partition keeps its order, while the other partitions are stored, so one poison record does not hold them back.
 * Then, when a partition failed, the invocation fails (its first failure) and Lambda retries the batch; the records
 * already stored come back as duplicates of their `topic:partition:offset@timestamp` (or configured) key. With
 * `reportBatchItemFailures` it answers the first failed record of each failed partition instead, and Lambda retries
 * from those. A database outage (`StoreUnavailableError`) fails every record alike: it rejects at once.
 */
export function createKafkaEventHandler(
  options: KafkaEventHandlerOptions,
): (event: KafkaLambdaEvent) => Promise<KafkaEventReport> {
  const byTopic = options.source === undefined ? sourcesByTopic(options.sources) : undefined;
  if (options.source !== undefined && options.sources[options.source]?.type !== 'kafka') {
    throw new ConfigError([
      { path: `sources.${options.source}`, message: 'is not a configured Kafka source' },
    ]);
  }
  const sourceOf = (delivery: KafkaDelivery): string => {
    const source = options.source ?? byTopic?.get(delivery.topic);
    if (source === undefined) {
      throw new UnmappedTopicError(`No Kafka source consumes topic "${delivery.topic}"`, {
        context: { topic: delivery.topic },
      });
    }
    return source;
  };
  return async (event) => {
    const counts = { stored: 0, duplicate: 0, dead: 0 };
    let wakeRelay = false;
    const failures: { readonly partition: string; readonly offset: number; readonly error: unknown }[] = [];
    for (const [partition, deliveries] of byPartition(kafkaDeliveries(event))) {
      for (const delivery of deliveries) {
        let result: BrokerIngestResult;
        try {
          result = await options.ingestion.ingest(sourceOf(delivery), delivery.message);
        } catch (error) {
          if (isStoreUnavailable(error)) throw error;
          failures.push({ partition, offset: delivery.offset, error });
          break;
        }
        counts[result.status] += 1;
        wakeRelay ||= result.wakeRelay;
        options.onIngested?.(result, delivery);
      }
    }
    if (!options.reportBatchItemFailures) {
      if (failures[0] !== undefined) throw failures[0].error;
      return { ...counts, wakeRelay };
    }
    const batchItemFailures = failures.map(({ partition, offset }) => ({
      itemIdentifier: { partition, offset },
    }));
    return { ...counts, wakeRelay, batchItemFailures };
  };
}
