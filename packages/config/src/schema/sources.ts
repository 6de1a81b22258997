import {
  CONFIG_DEFAULTS,
  defaultSourceTopicTemplate,
  SOURCE_TEMPLATE_PLACEHOLDERS,
  templateUses,
} from '@queuebox/core';
import * as z from 'zod';
import { awsClientFields, sqsQueueUrl } from './aws-services.ts';
import {
  headerName,
  idempotencyKeySchema,
  int,
  jsonPath,
  KAFKA_BROKER,
  MAX_ATTEMPTS,
  name,
  natsServers,
  stringList,
  template,
  text,
  transformSchema,
  URL_SEGMENT,
  url,
} from './fields.ts';
import { TRANSFORM_TIMEOUT_MAX_MS } from './inbox.ts';
import { checkKafkaSecurity, kafkaSecurityFields } from './kafka-security.ts';
import { authSchema, SCHEMES_WITH_EVENT_TYPE } from './source-auth.ts';

// `sources`: inbox sources by name (http, amqp, kafka, nats, sqs).

const sourceCommon = {
  mode: z
    .enum(['push', 'pull'])
    .default(CONFIG_DEFAULTS.source.mode)
    .describe(
      'push: the relay forwards stored rows to the outbox; pull: your worker claims them. Default push.',
    ),
  idempotencyKey: idempotencyKeySchema
    .optional()
    .describe("{ path } or { header }. When absent, the source uses its transport's message id."),
  eventTypePath: jsonPath().optional().describe('JSON path of the event type in the body, e.g. $.type.'),
  eventTypeFromHeader: z
    .union([z.boolean(), headerName()], { error: 'must be true, false or a header name' })
    .optional()
    .describe(
      'Read the event type from a header: a header name, or true for the default one: on an HTTP source the scheme\'s event header (e.g. X-GitHub-Event), else X-Event-Type; on a broker source the header "type" (for AMQP, the message\'s type property).',
    ),
  aggregateIdPath: jsonPath().optional().describe('JSON path of the aggregate id; becomes the outbox key.'),
  aggregateIdHeader: headerName().optional().describe('Header carrying the aggregate id.'),
  correlationIdPath: jsonPath().optional().describe('JSON path of the correlation id.'),
  correlationIdHeader: headerName()
    .optional()
    .describe(
      'Header carrying the correlation id. Default X-Correlation-Id unless correlationIdPath is set.',
    ),
  transform: transformSchema.optional().describe('Reshapes the payload before the duplicate check.'),
  transformTimeoutMs: int(1, TRANSFORM_TIMEOUT_MAX_MS)
    .optional()
    .describe(
      `Time one run of this source's transform may take, in ms, before the message is answered 503 transform_timeout or redelivered as a failure. Default inbox.transformTimeoutMs; at most ${TRANSFORM_TIMEOUT_MAX_MS}.`,
    ),
  keepHeaders: z
    .array(headerName())
    .optional()
    .describe(
      'Received headers to store and relay (any letter case); the others are dropped. Credentials, signatures, proxy and forwarding headers are never kept. Default: all but those.',
    ),
  maxAttempts: int(1, MAX_ATTEMPTS)
    .optional()
    .describe(
      `max_attempts of the inbox rows this source stores (what a pull worker gets). Default outbox.maxAttempts; at most ${MAX_ATTEMPTS}.`,
    ),
};

// The fields every broker source (amqp, kafka, nats, sqs) has beside sourceCommon.
const brokerCommon = {
  deadAfterFailures: int(1, 1000)
    .optional()
    .describe(
      `A message whose ingestion keeps failing for another reason than a database outage (a transform function that throws on it, a value the database refuses) is stored as a dead row, with the failure, once it has failed this many times in one process and its first failure is deadAfterMs old (a lock or statement timeout, a deadlock or an outage is never counted); until then it is tried again, and on Kafka holds up its partition. Default ${CONFIG_DEFAULTS.source.deadAfterFailures}; at most 1000.`,
    ),
  deadAfterMs: int(0, 86_400_000)
    .optional()
    .describe(
      `See deadAfterFailures: how old the first failure must be, in ms (0: count only). Default ${CONFIG_DEFAULTS.source.deadAfterMs} (5 minutes); at most 86400000 (a day).`,
    ),
};

const sourceTopic = (fallback: string) =>
  template(SOURCE_TEMPLATE_PLACEHOLDERS)
    .default(fallback)
    .describe(
      `Outbox topic the relay writes: a template with {{ source }} and {{ eventType }}. Default ${fallback}.`,
    );

interface SourceShape {
  readonly type: string;
  readonly auth?: { readonly scheme: string };
  readonly topic: string;
  readonly mode?: string | undefined;
  readonly eventTypePath?: string | undefined;
  readonly eventTypeFromHeader?: boolean | string | undefined;
  readonly aggregateIdPath?: string | undefined;
  readonly aggregateIdHeader?: string | undefined;
  readonly correlationIdPath?: string | undefined;
  readonly correlationIdHeader?: string | undefined;
  readonly retryDelayMs?: number | undefined;
  readonly maxRetryDelayMs?: number | undefined;
}

function checkSource(s: SourceShape, ctx: z.RefinementCtx): void {
  const fromHeader = s.eventTypeFromHeader !== undefined && s.eventTypeFromHeader !== false;
  if (s.eventTypePath !== undefined && fromHeader) {
    ctx.addIssue({
      code: 'custom',
      path: ['eventTypeFromHeader'],
      message: 'set either eventTypePath or eventTypeFromHeader, not both',
    });
  }
  if (s.aggregateIdPath !== undefined && s.aggregateIdHeader !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['aggregateIdHeader'],
      message: 'set either aggregateIdPath or aggregateIdHeader, not both',
    });
  }
  if (s.correlationIdPath !== undefined && s.correlationIdHeader !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['correlationIdHeader'],
      message: 'set either correlationIdPath or correlationIdHeader, not both',
    });
  }
  if (s.retryDelayMs !== undefined && s.maxRetryDelayMs !== undefined && s.maxRetryDelayMs < s.retryDelayMs) {
    // The consumer would silently raise it to retryDelayMs: say so instead of ignoring what was set.
    ctx.addIssue({
      code: 'custom',
      path: ['maxRetryDelayMs'],
      message: `must be at least retryDelayMs (${s.retryDelayMs})`,
    });
  }
  const natural = s.type === 'http' && s.auth !== undefined && SCHEMES_WITH_EVENT_TYPE.has(s.auth.scheme);
  // A pull source's rows are never relayed, so its topic is never rendered: nothing to refuse there, except what the
  // specification refuses whatever the mode: an AMQP template with {{ eventType }} and no way to an event type.
  const refused = s.mode !== 'pull' || s.type === 'amqp';
  if (
    refused &&
    templateUses(s.topic, 'eventType') &&
    s.eventTypePath === undefined &&
    !fromHeader &&
    !natural
  ) {
    const why =
      s.type === 'amqp'
        ? 'an AMQP message carries no event type of its own'
        : 'nothing would give the message an event type';
    ctx.addIssue({
      code: 'custom',
      path: ['topic'],
      message: `uses {{ eventType }} but the source sets neither eventTypePath nor eventTypeFromHeader (${why}); set one, or use {{ source }}`,
    });
  }
}

/**
 * The schema of one source type: the fields every source has, the type's default topic, the type's own `fields`,
 * and the checks across fields ({@link checkSource}).
 */
function sourceOfType<const T extends string, F extends z.core.$ZodLooseShape>(type: T, fields: F) {
  return (
    z
      .strictObject({
        type: z.literal(type),
        ...sourceCommon,
        topic: sourceTopic(defaultSourceTopicTemplate(type)),
        ...fields,
      })
      // The output of a generic shape is opaque to the compiler; every instance has SourceShape's fields.
      .superRefine((s, ctx) => checkSource(s as SourceShape, ctx))
  );
}

const httpSourceSchema = sourceOfType('http', {
  path: z
    .string()
    .regex(URL_SEGMENT, 'must be one URL path segment (letters, digits, ".", "-", "_", "~"), without "/"')
    .refine((segment) => segment !== '.' && segment !== '..', {
      message:
        'must not be "." or "..": URL parsers and proxies collapse such a segment ({basePath}/.. is the parent path), so no request could reach this source',
    })
    .optional()
    .describe("Path under inbox.basePath. Default: the source's name."),
  auth: authSchema.describe('How requests are authenticated, on the raw body; { scheme: none } to opt out.'),
});

const amqpSourceSchema = sourceOfType('amqp', {
  ...brokerCommon,
  url: url(['amqp', 'amqps'], 'AMQP').describe('Broker URL (amqp:// or amqps://), for the local consumer.'),
  queue: text().describe('Queue to consume.'),
  prefetch: int(1, 65_535)
    .default(10)
    .describe('Unacknowledged messages in flight. Default 10; at most 65535.'),
  deliveryLimit: int(0, 1_000_000)
    .optional()
    .describe(
      "The queue's delivery-limit (a quorum queue drops or dead-letters a message whose failed deliveries pass it): a message whose x-delivery-count header reached it is on its last delivery, and a failure other than a database outage then stores it as a dead row at once. Default 20 (RabbitMQ 4.x's default; set your queue's); 0 for a queue without a limit (RabbitMQ 3.x quorum queues by default); at most 1000000.",
    ),
  // Optional without a default here: the consumer's own defaults apply, and the parsed configuration keeps only
  // what the operator set. Bounded well below RabbitMQ's consumer_timeout (30 min), which closes a channel that
  // keeps a delivery unacknowledged longer.
  retryDelayMs: int(1, 60_000)
    .optional()
    .describe(
      'Local consumer: the first pause before a delivery whose ingestion failed is tried again in process (database unavailable, or any other failure); doubles up to maxRetryDelayMs. Default 1000; at most 60000. The amqp-source function on AWS leaves retries to the event source mapping.',
    ),
  maxRetryDelayMs: int(1, 600_000)
    .optional()
    .describe(
      "Local consumer: the longest pause between two tries of a delivery. Default 30000; at least retryDelayMs; at most 600000 (10 min, below RabbitMQ's default consumer_timeout of 30 min).",
    ),
});

const kafkaSourceSchema = sourceOfType('kafka', {
  ...brokerCommon,
  brokers: z
    .array(z.string().regex(KAFKA_BROKER, 'must be host:port'))
    .min(1)
    .describe('Bootstrap brokers, host:port.'),
  topics: stringList().describe('Kafka topics to consume.'),
  groupId: text()
    .optional()
    .describe(
      'Consumer group. Default queuebox-{name}: two installs (schemas, stages, services) with a source of the same name on one topic join one group and each gets part of the records; give each install its own groupId.',
    ),
  // Optional without a default here: the consumer's own defaults apply. The kafka-source function on AWS commits
  // through the event source mapping, so these concern the local consumer only.
  commitIntervalMs: int(1, 60_000)
    .optional()
    .describe(
      "Local consumer: within a batch, the stored records' offset is committed once this long has passed since the last commit (or commitEveryRecords records were stored), and at the end of the batch. A restart after a crash stores again (as duplicates) at most about this much. Default 1000; at most 60000.",
    ),
  commitEveryRecords: int(1, 100_000)
    .optional()
    .describe('Local consumer: see commitIntervalMs. Default 500; at most 100000.'),
  retryDelayMs: int(1, 10_000)
    .optional()
    .describe(
      "Local consumer: pause between tries of a record whose ingestion failed (the partition waits meanwhile; a heartbeat follows each pause). Default 1000; at most 10000, well inside the group's 30 s session timeout.",
    ),
  // The local consumer's connection; the kafka-source function on AWS is reached by the event source mapping,
  // whose authentication is the trigger's (infra), not these keys.
  ...kafkaSecurityFields,
}).superRefine(checkKafkaSecurity);

const natsSourceSchema = sourceOfType('nats', {
  ...brokerCommon,
  servers: natsServers(),
  stream: text().describe('JetStream stream.'),
  durable: text()
    .optional()
    .describe(
      'Durable consumer name. Default queuebox-{name}: two installs (schemas, stages, services) with a source of the same name on one stream share one consumer and each gets part of the messages; give each install its own durable.',
    ),
  subject: text()
    .optional()
    .describe('Filter subject of the consumer. Default: every subject of the stream.'),
  batchSize: int(1, 1000).default(100).describe('Messages pulled per fetch. Default 100; at most 1000.'),
  maxBatchBytes: int(1024, 64 * 1024 * 1024)
    .default(32 * 1024 * 1024)
    .describe(
      "Most bytes one fetch may bring: a fetch asks for at most this / the largest message the stream can hold (its max_msg_size, else the server's max_payload, 1 MiB by default) messages, at least one, and at most batchSize. Default 33554432 (32 MiB: 32 messages of the default max_payload); at most 67108864. Keep it under the server's max_pending (64 MiB by default), above which the server closes the connection as a slow consumer.",
    ),
});

const sqsSourceSchema = sourceOfType('sqs', {
  ...brokerCommon,
  queueUrl: sqsQueueUrl().describe(
    'Queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>); on AWS its ARN is derived from it.',
  ),
  ...awsClientFields,
  batchSize: int(1, 10)
    .default(10)
    .describe(
      "Local consumer: messages per ReceiveMessage (on AWS: aws.sources.<name>.batchSize). Default 10; at most 10 (SQS's limit).",
    ),
  waitTimeSeconds: int(0, 20)
    .default(20)
    .describe("Local consumer: long-poll wait, in seconds. Default 20; at most 20 (SQS's limit)."),
});

const sourceSchema = z.discriminatedUnion('type', [
  httpSourceSchema,
  amqpSourceSchema,
  kafkaSourceSchema,
  natsSourceSchema,
  sqsSourceSchema,
]);

/** Source types. */
export const SOURCE_TYPES = ['http', 'amqp', 'kafka', 'nats', 'sqs'] as const;

/** The default correlation-id header of a source that configures neither a correlation path nor a header. */
export const DEFAULT_CORRELATION_ID_HEADER = CONFIG_DEFAULTS.source.correlationIdHeader;

// Defaults that depend on the source's name, or on another key, are filled once the entry is valid.
function withSourceDefaults(sourceName: string, s: z.output<typeof sourceSchema>) {
  const correlationIdHeader =
    s.correlationIdHeader ?? (s.correlationIdPath === undefined ? DEFAULT_CORRELATION_ID_HEADER : undefined);
  switch (s.type) {
    case 'http':
      return { ...s, correlationIdHeader, path: s.path ?? sourceName };
    case 'kafka':
      return { ...s, correlationIdHeader, groupId: s.groupId ?? `queuebox-${sourceName}` };
    case 'nats':
      return { ...s, correlationIdHeader, durable: s.durable ?? `queuebox-${sourceName}` };
    default:
      return { ...s, correlationIdHeader };
  }
}

export const sourcesSchema = z
  .record(name(), sourceSchema)
  .transform((sources) =>
    Object.fromEntries(Object.entries(sources).map(([key, s]) => [key, withSourceDefaults(key, s)])),
  );
