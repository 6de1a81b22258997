import type { ConfigIssue, OutgoingMessage, Publisher, PublishOutcome } from '@queuebox/core';
import { brokerPublishHeaders, ConfigError, renderTemplate } from '@queuebox/core';
import kafkajs, { type Message, Partitioners, type Producer } from 'kafkajs';
import { createKafkaClient, describeKafkaError, type KafkaClientOptions } from './client.ts';
import { type KafkaSecurityOptions, kafkaSecurityIssues, mskIamRegion } from './security.ts';

/**
 * `destinations.<name>` of `type: kafka` (the validated configuration fits as it is), with its `ssl` and `sasl`
 * (TLS and SASL, see `kafkaSecurity`).
 */
export interface KafkaDestinationOptions extends KafkaSecurityOptions {
  readonly type?: 'kafka';
  /** Bootstrap brokers, `host:port`. */
  readonly brokers: readonly string[];
  /** Topic template with `{{ topic }}` and `{{ key }}`. Default `{{ topic }}`. */
  readonly topic?: string;
  /** Kafka client id. Default `queuebox`. */
  readonly clientId?: string;
  /**
   * Let the broker create a topic that does not exist (when the broker's `auto.create.topics.enable` allows it).
   * Default false: a misspelled topic, or one rendered from an event type a webhook sender chose, is not created;
   * its rows are retried (`UNKNOWN_TOPIC_OR_PARTITION`) until the topic exists or they have no attempt left.
   */
  readonly allowAutoTopicCreation?: boolean;
}

/** Options of the publisher: the destination plus tuning. */
export interface KafkaPublisherOptions
  extends KafkaDestinationOptions,
    Omit<KafkaClientOptions, 'brokers' | 'clientId'> {
  /** The destination's name, for error messages. Default `kafka`. */
  readonly name?: string;
  /** Most messages sent in one produce request. Default 500. */
  readonly maxBatchMessages?: number;
  /**
   * Most bytes (values, keys and headers, with a per-record allowance) sent in one produce request; a message
   * larger than this goes alone. Default 16 MiB (`DEFAULT_MAX_REQUEST_BYTES`).
   */
  readonly maxRequestBytes?: number;
}

/**
 * Default bound of one produce request's size: 16 MiB. The broker drops the connection on a request over its
 * `socket.request.max.bytes` (100 MiB by default, on MSK too; some operators lower it), which failed every row of
 * the request, round after round. 16 MiB stays far below that, still sends 16 rows of Kafka's largest default
 * message (1 MiB) or hundreds of usual ones per round trip, and goes out well within the 10 s request timeout
 * (`requestTimeoutMs`) on a link of a few MB/s.
 */
export const DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024;

/**
 * What a record adds to a produce request beyond its key, value and header bytes: its length, attributes,
 * timestamp and offset deltas, and the varint lengths of its key, value and headers (at most ~40 bytes; a round
 * allowance, since the bound only has to keep requests far from the broker's limit).
 */
const RECORD_OVERHEAD_BYTES = 64;

/**
 * Broker errors no retry can fix for this message: too large, a topic name Kafka refuses, a record it refuses.
 * Anything else (connection loss, timeouts, leader changes, authorization) may heal, so it is retried.
 */
const PERMANENT_ERROR_TYPES: ReadonlySet<string> = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_TOPIC_EXCEPTION',
  'INVALID_RECORD',
  'CORRUPT_MESSAGE',
]);

/** The broker error type (`MESSAGE_TOO_LARGE`, …) somewhere in a kafkajs error's cause chain, if permanent. */
export function permanentKafkaErrorType(error: unknown): string | undefined {
  const type = kafkaErrorType(error);
  return type !== undefined && PERMANENT_ERROR_TYPES.has(type) ? type : undefined;
}

/**
 * The broker error type (`UNKNOWN_TOPIC_OR_PARTITION`, `TOPIC_AUTHORIZATION_FAILED`, …) somewhere in a kafkajs
 * error's cause chain: the broker answered, and refused. Undefined when no broker answer is in it (connection
 * refused or lost, a timeout): then nothing was said about any one topic.
 */
export function kafkaErrorType(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const type = (current as { type?: unknown }).type;
    if (typeof type === 'string' && type !== '') return type;
    current =
      (current as { cause?: unknown }).cause ?? (current as { originalError?: unknown }).originalError;
  }
  return undefined;
}

interface Pending {
  readonly topic: string;
  readonly message: Message;
  /** The record's size in a request, about (see `RECORD_OVERHEAD_BYTES`). */
  readonly bytes: number;
  readonly resolve: (outcome: PublishOutcome) => void;
}

/** The first header whose value is not text (what kafkajs cannot encode), or undefined. */
function headerThatIsNotText(headers: Readonly<Record<string, unknown>>): string | undefined {
  for (const [name, value] of Object.entries(headers)) if (typeof value !== 'string') return name;
  return undefined;
}

/**
 * Whether kafkajs itself failed (a broker answer, a connection, a timeout), not the encoding of a message. (Its
 * error classes are read from the default export: Node's ES module loader cannot see them as named exports of the
 * CommonJS package, and `npm start` runs this file under Node, not a bundler.)
 */
function isKafkaFailure(error: unknown): boolean {
  return error instanceof kafkajs.KafkaJSError;
}

/**
 * core's `Publisher` for Kafka: one idempotent producer per destination (kafkajs `idempotent: true`,
 * `maxInFlightRequests: 1`, every send with `acks: -1`, i.e. all in-sync replicas), connected on first use,
 * reused, and replaced after any failed send (a fresh producer id, so no sequence number state survives a fault).
 *
 * Each message: topic = the `topic` template (default `{{ topic }}`); key = the row's key, so the default
 * (murmur2, Java-compatible) partitioner puts every row of a key on one partition; value = the JSON payload;
 * headers = the row's, plus `message-id` (the message id) and `content-type: application/json`. Publishes that
 * arrive together (the poller delivers different keys concurrently, one row per key at a time) go out in one
 * produce request of at most `maxBatchMessages` messages and `maxRequestBytes` bytes, so per-key order holds and
 * throughput does not pay one round trip per row. A missing topic is not created unless `allowAutoTopicCreation`
 * is set. A request the broker refused (any broker error type, e.g. `UNKNOWN_TOPIC_OR_PARTITION` for a missing
 * topic when auto-creation is off, `TOPIC_AUTHORIZATION_FAILED`) that holds several topics is re-sent topic by
 * topic, so one bad topic does not hold back the rows of the others. Outcomes: acknowledged → `sent`; an empty
 * rendered topic or a permanent broker error (see `permanentKafkaErrorType`; a failed batch is re-sent message by
 * message to find the culprit) → `dead`; a header value that is not text → `dead`, never sent (a transform
 * of the outbox already dead-letters such a row); a request that fails for another reason than Kafka (kafkajs could
 * not encode a message) is re-sent message by message, so only the message that fails alone is retried; anything
 * else → `retry`.
 */
export function createKafkaPublisher(options: KafkaPublisherOptions): Publisher {
  const name = options.name ?? 'kafka';
  const template = options.topic ?? '{{ topic }}';
  const maxBatch = options.maxBatchMessages ?? 500;
  const maxBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  const issues: ConfigIssue[] = [];
  // kafkajs refuses an idempotent producer without retries, but only when the first publish creates it.
  if (options.retries !== undefined && !(Number.isInteger(options.retries) && options.retries >= 1)) {
    issues.push({
      path: `destinations.${name}.retries`,
      message: 'an idempotent producer needs at least 1 retry',
    });
  }
  if (!(Number.isInteger(maxBatch) && maxBatch >= 1)) {
    issues.push({
      path: `destinations.${name}.maxBatchMessages`,
      message: 'must be a whole number of at least 1',
    });
  }
  if (!(Number.isInteger(maxBytes) && maxBytes >= 1)) {
    issues.push({
      path: `destinations.${name}.maxRequestBytes`,
      message: 'must be a whole number of at least 1',
    });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  const kafka = createKafkaClient(options);
  let producer: Promise<Producer> | undefined;
  let queue: Pending[] = [];
  let flushing: Promise<void> | undefined;
  let closed = false;

  function currentProducer(): Promise<Producer> {
    if (producer) return producer;
    const created = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: options.allowAutoTopicCreation ?? false,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    const connecting = created.connect().then(() => created);
    producer = connecting;
    connecting.catch(() => {
      if (producer === connecting) producer = undefined;
      void created.disconnect().catch(() => undefined);
    });
    created.on(created.events.DISCONNECT, () => {
      if (producer === connecting) producer = undefined;
    });
    return connecting;
  }

  function replaceProducer() {
    const old = producer;
    producer = undefined;
    if (old) void old.then((p) => p.disconnect()).catch(() => undefined);
  }

  async function send(batch: readonly Pending[]): Promise<unknown> {
    const byTopic = new Map<string, Message[]>();
    for (const item of batch) {
      const messages = byTopic.get(item.topic) ?? [];
      messages.push(item.message);
      byTopic.set(item.topic, messages);
    }
    try {
      const p = await currentProducer();
      await p.sendBatch({
        acks: -1,
        topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
      });
      return undefined;
    } catch (error) {
      replaceProducer();
      return error ?? new Error('unknown failure');
    }
  }

  async function flush(batch: readonly Pending[]): Promise<void> {
    const error = await send(batch);
    if (error === undefined) {
      for (const item of batch) item.resolve({ kind: 'sent' });
      return;
    }
    const permanent = permanentKafkaErrorType(error);
    const topics = [...new Set(batch.map((item) => item.topic))];
    if (topics.length > 1 && kafkaErrorType(error) !== undefined) {
      // The broker refused something (a missing topic, one not authorized, a message too large): kafkajs fails the
      // whole request for it. Each topic alone, so the rows of healthy topics are sent and only the refused
      // topic's rows are retried or dead-lettered. A failure without a broker answer (connection, timeout) is
      // no one topic's, so it is not split.
      for (const topic of topics) await flush(batch.filter((item) => item.topic === topic));
      return;
    }
    if ((permanent !== undefined || !isKafkaFailure(error)) && batch.length > 1) {
      // One message spoiled the request (the broker refused it, or kafkajs could not encode it): send each alone so
      // only that one is dead-lettered or retried.
      for (const item of batch) await flush([item]);
      return;
    }
    const text = `Kafka did not accept the message for destination "${name}": ${describeKafkaError(error)}`;
    for (const item of batch) {
      item.resolve(permanent !== undefined ? { kind: 'dead', error: text } : { kind: 'retry', error: text });
    }
  }

  /** The messages of the next produce request: at most `maxBatch`, and `maxBytes` unless the first is larger. */
  function nextRequest(): Pending[] {
    let bytes = 0;
    let count = 0;
    for (const item of queue) {
      if (count === maxBatch || (count > 0 && bytes + item.bytes > maxBytes)) break;
      bytes += item.bytes;
      count++;
    }
    return queue.slice(0, count);
  }

  function schedule() {
    if (flushing) return;
    flushing = (async () => {
      // Gather what the current turn of the event loop publishes into one request.
      await new Promise((resolve) => setImmediate(resolve));
      while (queue.length > 0) {
        const batch = nextRequest();
        queue = queue.slice(batch.length);
        await flush(batch);
      }
    })().finally(() => {
      flushing = undefined;
      if (queue.length > 0) schedule();
    });
  }

  function publish(message: OutgoingMessage, signal?: AbortSignal): Promise<PublishOutcome> {
    if (closed) return Promise.resolve({ kind: 'retry', error: `the publisher of "${name}" is closed` });
    if (signal?.aborted) return Promise.resolve({ kind: 'retry', error: 'aborted before publishing' });
    const topic = renderTemplate(template, { topic: message.topic, key: message.key });
    if (topic === '') {
      return Promise.resolve({
        kind: 'dead',
        error: `the topic template of "${name}" rendered an empty topic`,
      });
    }
    const headers = brokerPublishHeaders(message);
    headers['content-type'] ??= 'application/json';
    const notText = headerThatIsNotText(headers);
    if (notText !== undefined) {
      return Promise.resolve({
        kind: 'dead',
        error: `Kafka cannot carry the header "${notText}" of destination "${name}": its value is not text`,
      });
    }
    const value = JSON.stringify(message.payload);
    let bytes =
      RECORD_OVERHEAD_BYTES +
      Buffer.byteLength(value) +
      (typeof message.key === 'string' ? Buffer.byteLength(message.key) : 0);
    for (const [header, text] of Object.entries(headers))
      bytes += Buffer.byteLength(header) + Buffer.byteLength(text);
    return new Promise((resolve) => {
      // A message still waiting is taken back; for one in a request in flight the answer is no longer awaited
      // (it may still be written: a duplicate with the same message-id). The listener goes when the message
      // settles, so a caller's long-lived signal keeps none per message.
      const onAbort = () => {
        const at = queue.indexOf(item);
        if (at !== -1) queue.splice(at, 1);
        settle({
          kind: 'retry',
          error: at !== -1 ? 'aborted before publishing' : 'aborted while waiting for Kafka',
        });
      };
      const settle = (outcome: PublishOutcome) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const item: Pending = {
        topic,
        message: { key: message.key, value, headers },
        bytes,
        resolve: settle,
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(item);
      schedule();
    });
  }

  return {
    publish,
    async close() {
      closed = true;
      while (flushing) await flushing;
      const open = producer;
      producer = undefined;
      if (open) await open.then((p) => p.disconnect()).catch(() => undefined);
    },
  };
}

/**
 * The factory for packages/outbox's `createPublishers` (`{ ...defaultPublisherFactories, kafka:
 * kafkaPublisherFactory }`): checks the fields it needs and throws ConfigError naming them.
 */
export function kafkaPublisherFactory(name: string, options: { readonly type: string }): Publisher {
  const fields = options as unknown as Readonly<Record<string, unknown>>;
  const brokers = fields.brokers;
  const issues: ConfigIssue[] = [];
  const valid =
    Array.isArray(brokers) &&
    brokers.length > 0 &&
    brokers.every((b) => typeof b === 'string' && /^[^\s:/]+:\d{1,5}$/.test(b));
  if (!valid)
    issues.push({ path: `destinations.${name}.brokers`, message: 'must be a non-empty list of host:port' });
  if (fields.topic !== undefined && typeof fields.topic !== 'string') {
    issues.push({ path: `destinations.${name}.topic`, message: 'must be a template string' });
  }
  issues.push(...kafkaSecurityIssues(fields, `destinations.${name}`));
  const security = fields as KafkaSecurityOptions;
  // Said here, with the destination's path, rather than by the client without it.
  if (
    valid &&
    security.sasl?.mechanism === 'aws' &&
    mskIamRegion(brokers as string[], security.sasl) === undefined
  ) {
    issues.push({
      path: `destinations.${name}.sasl.region`,
      message:
        'is needed for mechanism aws: the brokers are not MSK names (…kafka.<region>.amazonaws.com) and AWS_REGION is not set',
    });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return createKafkaPublisher({
    name,
    brokers: brokers as string[],
    topic: typeof fields.topic === 'string' ? fields.topic : undefined,
    clientId: typeof fields.clientId === 'string' ? fields.clientId : undefined,
    allowAutoTopicCreation:
      typeof fields.allowAutoTopicCreation === 'boolean' ? fields.allowAutoTopicCreation : undefined,
    maxRequestBytes: typeof fields.maxRequestBytes === 'number' ? fields.maxRequestBytes : undefined,
    // Before these two were passed, a destination on a cluster that needs TLS or SASL could not connect at all.
    ssl: security.ssl,
    sasl: security.sasl,
  });
}
