import { DESTINATION_TEMPLATE_PLACEHOLDERS } from '@queuebox/core';
import * as z from 'zod';
import {
  awsClientFields,
  EVENT_BUS,
  maxMessageBytes,
  messageGroupId,
  SNS_TOPIC_ARN,
  sqsQueueUrl,
} from './aws-services.ts';
import {
  headerName,
  int,
  KAFKA_BROKER,
  MAX_ATTEMPTS,
  natsServers,
  standardWebhooksSecrets,
  template,
  text,
  transformSchema,
  url,
  WEEK_MS,
} from './fields.ts';
import { checkKafkaSecurity, kafkaSecurityFields } from './kafka-security.ts';

// `destinations`: where the outbox delivers, by name (http, rabbitmq, kafka, nats, sqs, sns, eventbridge).

/** Default `timeoutMs` of an http destination: the HTTP publisher's own default (packages/outbox). */
export const HTTP_TIMEOUT_DEFAULT_MS = 15_000;
/** The longest `timeoutMs` of an http destination: 15 min. */
export const HTTP_TIMEOUT_MAX_MS = 900_000;
/** Default `maxMessageBytes` of a rabbitmq destination: the publisher's own default (packages/rabbitmq), 128 MiB. */
export const RABBITMQ_MAX_MESSAGE_BYTES_DEFAULT = 134_217_728;
/** The highest `maxMessageBytes` of a rabbitmq destination: RabbitMQ's highest max_message_size, 512 MiB. */
export const RABBITMQ_MAX_MESSAGE_BYTES_LIMIT = 536_870_912;

const destinationCommon = {
  transform: transformSchema.optional().describe('Runs after the route transform, before publishing.'),
  maxAttempts: int(1, MAX_ATTEMPTS)
    .optional()
    .describe(
      `Lowers the max_attempts of rows routed here, never raises it (a row's own max_attempts, e.g. inbox.relay.maxAttempts or outbox.maxAttempts for the rows the relay writes, is the most; a higher value warns). Default: the row's; at most ${MAX_ATTEMPTS}.`,
    ),
  backoff: z
    .strictObject({
      baseMs: int(1, WEEK_MS)
        .optional()
        .describe(`Default outbox.backoff.baseMs; at most ${WEEK_MS} (7 days).`),
      maxMs: int(1, WEEK_MS)
        .optional()
        .describe(`Default outbox.backoff.maxMs; at most ${WEEK_MS} (7 days).`),
    })
    .optional()
    .describe('Overrides outbox.backoff for rows routed here.'),
};

const httpDestinationSchema = z.strictObject({
  type: z.literal('http'),
  ...destinationCommon,
  url: url(['http', 'https'], 'HTTP').describe('Endpoint receiving the message body.'),
  method: z.enum(['POST', 'PUT', 'PATCH']).default('POST').describe('Default POST.'),
  headers: z
    .record(headerName(), z.string())
    .default({})
    .describe('Extra request headers; values may be secret:// or env:// references.'),
  timeoutMs: int(1, HTTP_TIMEOUT_MAX_MS)
    .default(HTTP_TIMEOUT_DEFAULT_MS)
    .describe(
      `Request timeout, in ms. Default ${HTTP_TIMEOUT_DEFAULT_MS} (Standard Webhooks recommends 15–30 s); at most ${HTTP_TIMEOUT_MAX_MS} (15 min). outbox.claimTimeoutMs must be at least the longest one + 2000.`,
    ),
  signing: z
    .strictObject({
      scheme: z.literal('standard-webhooks'),
      secrets: standardWebhooksSecrets(
        'Signing secrets (whsec_<base64>, at least 24 bytes each); each signs, so receivers can rotate.',
      ),
    })
    .optional()
    .describe('Sign deliveries (webhook-id, webhook-timestamp, webhook-signature).'),
  retryableStatuses: z
    .array(int(400, 499))
    .default([])
    .describe(
      'Deprecated, no effect: every answer but a 2xx is retried until the row has no attempt left. Accepted (with a warning) so older configurations still start.',
    ),
  maxConcurrency: int(1, 1000)
    .default(16)
    .describe('Requests in flight to this destination. Default 16; at most 1000.'),
  maxErrorBodyBytes: int(0, 4096)
    .default(256)
    .describe(
      "Bytes of an error answer's body kept in last_error and the log (our own credentials and card numbers masked). Default 256; at most 4096; 0 keeps the status line only.",
    ),
});

const rabbitmqDestinationSchema = z.strictObject({
  type: z.literal('rabbitmq'),
  ...destinationCommon,
  url: url(['amqp', 'amqps'], 'AMQP').describe('Broker URL.'),
  exchange: z.string().describe('Exchange to publish to ("" is the default exchange).'),
  routingKey: template(DESTINATION_TEMPLATE_PLACEHOLDERS, { allowEmpty: true })
    .default('{{ topic }}')
    .describe('Routing key template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  persistent: z.boolean().default(true).describe('Publish persistent messages. Default true.'),
  maxMessageBytes: int(1, RABBITMQ_MAX_MESSAGE_BYTES_LIMIT)
    .default(RABBITMQ_MAX_MESSAGE_BYTES_DEFAULT)
    .describe(
      `Largest message body (the JSON payload, in bytes: what the broker's max_message_size counts) to publish; a larger row is never sent: the outbox retries it like any failure, with backoff, until no attempt remains, then marks it dead. Default ${RABBITMQ_MAX_MESSAGE_BYTES_DEFAULT} (128 MiB, the max_message_size default of RabbitMQ 3.x and Amazon MQ; 4.x: 16 MiB); at most ${RABBITMQ_MAX_MESSAGE_BYTES_LIMIT} (512 MiB, the highest RabbitMQ allows). Set it to at most the broker's max_message_size (16777216 on a 4.x broker with its defaults): the broker closes the channel over a larger message, which then fares as above (never sent, dead when no attempt remains), while the publishes beside it on the channel are retried.`,
    ),
});

/** Kafka's default `socket.request.max.bytes` (100 MiB): the highest `maxRequestBytes` taken. */
const KAFKA_MAX_REQUEST_BYTES_LIMIT = 104_857_600;

const kafkaDestinationFields = z.strictObject({
  type: z.literal('kafka'),
  ...destinationCommon,
  brokers: z
    .array(z.string().regex(KAFKA_BROKER, 'must be host:port'))
    .min(1)
    .describe('Bootstrap brokers, host:port.'),
  topic: template(DESTINATION_TEMPLATE_PLACEHOLDERS)
    .default('{{ topic }}')
    .describe('Kafka topic template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  clientId: text().optional().describe('Kafka client id. Default chosen by the publisher.'),
  allowAutoTopicCreation: z
    .boolean()
    .default(false)
    .describe(
      'Let the broker create a topic that does not exist (if its auto.create.topics.enable allows it). Default false: a misspelled topic, or one rendered from an event type a webhook sender chose, is not created; its rows are retried until the topic exists or they have no attempt left. Before this option the publisher always let the broker create it.',
    ),
  maxRequestBytes: int(1024, KAFKA_MAX_REQUEST_BYTES_LIMIT)
    .optional()
    .describe(
      `Most bytes (values, keys and headers) in one produce request; a larger message goes alone. The broker drops the connection over a request above its socket.request.max.bytes (${KAFKA_MAX_REQUEST_BYTES_LIMIT}, 100 MiB, by default, on MSK too): set this below it where an operator lowered that. Default 16777216 (16 MiB); at least 1024, at most ${KAFKA_MAX_REQUEST_BYTES_LIMIT}.`,
    ),
  ...kafkaSecurityFields,
});

const kafkaDestinationSchema = kafkaDestinationFields.superRefine(checkKafkaSecurity);

const natsDestinationSchema = z.strictObject({
  type: z.literal('nats'),
  ...destinationCommon,
  servers: natsServers(),
  subject: template(DESTINATION_TEMPLATE_PLACEHOLDERS)
    .default('{{ topic }}')
    .describe('Subject template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  jetstream: z.boolean().default(true).describe('Publish through JetStream and await its ack. Default true.'),
});

const sqsDestinationSchema = z.strictObject({
  type: z.literal('sqs'),
  ...destinationCommon,
  queueUrl: sqsQueueUrl().describe(
    'Queue URL; a name ending in .fifo is a FIFO queue (key → MessageGroupId).',
  ),
  ...awsClientFields,
  messageGroupId: messageGroupId(),
  maxMessageBytes: maxMessageBytes('queue'),
});

const snsDestinationSchema = z.strictObject({
  type: z.literal('sns'),
  ...destinationCommon,
  topicArn: z
    .string()
    .regex(SNS_TOPIC_ARN, 'must be the ARN of an SNS topic (arn:aws:sns:<region>:<account>:<name>)')
    .describe('Topic ARN; a name ending in .fifo is a FIFO topic (key → MessageGroupId).'),
  ...awsClientFields,
  messageGroupId: messageGroupId(),
  maxMessageBytes: maxMessageBytes('topic'),
});

const eventBridgeDestinationSchema = z.strictObject({
  type: z.literal('eventbridge'),
  ...destinationCommon,
  eventBus: z
    .string()
    .regex(EVENT_BUS, 'must be an event bus name or an event bus ARN')
    .default('default')
    .describe("Event bus name or ARN. Default default (the account's default bus)."),
  source: z
    .string()
    .min(1)
    .max(256)
    .refine((v) => !/^aws\./i.test(v), 'must not start with "aws." (reserved for AWS services)')
    .describe("The events' Source, e.g. com.example.orders."),
  detailType: template(DESTINATION_TEMPLATE_PLACEHOLDERS)
    .default('{{ topic }}')
    .describe('DetailType template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  ...awsClientFields,
  maxEventBytes: int(1, 1_048_575)
    .default(1_048_575)
    .describe(
      'Largest event (Source + DetailType + Detail, as EventBridge counts), also per request; a larger row is never sent: the outbox retries it like any failure, with backoff, until no attempt remains, then marks it dead. Default 1048575, also at most 1048575: PutEvents wants the entries "less than 1MB".',
    ),
});

export const destinationSchema = z.discriminatedUnion('type', [
  httpDestinationSchema,
  rabbitmqDestinationSchema,
  kafkaDestinationSchema,
  natsDestinationSchema,
  sqsDestinationSchema,
  snsDestinationSchema,
  eventBridgeDestinationSchema,
]);

/** Destination types. */
export const DESTINATION_TYPES = ['http', 'rabbitmq', 'kafka', 'nats', 'sqs', 'sns', 'eventbridge'] as const;
