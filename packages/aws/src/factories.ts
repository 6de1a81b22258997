import type { ConfigIssue, Publisher } from '@queuebox/core';
import { ConfigError } from '@queuebox/core';
import type { AwsClientOptions } from './aws-client.ts';
import { createEventBridgePublisher } from './eventbridge-publisher.ts';
import { createSnsPublisher } from './sns-publisher.ts';
import { createSqsPublisher } from './sqs-publisher.ts';

type Fields = Readonly<Record<string, unknown>>;

function text(fields: Fields, key: string): string | undefined {
  return typeof fields[key] === 'string' ? (fields[key] as string) : undefined;
}

function clientOptions(fields: Fields): AwsClientOptions {
  return {
    region: text(fields, 'region'),
    endpoint: text(fields, 'endpoint'),
  };
}

function required(name: string, fields: Fields, key: string, what: string, issues: ConfigIssue[]): string {
  const value = text(fields, key);
  if (value === undefined || value === '')
    issues.push({ path: `destinations.${name}.${key}`, message: what });
  return value ?? '';
}

function optionalNumber(fields: Fields, key: string): number | undefined {
  return typeof fields[key] === 'number' ? (fields[key] as number) : undefined;
}

/**
 * The factory of `type: sqs` destinations for packages/outbox's `createPublishers`: checks the fields it needs and
 * throws ConfigError naming them.
 */
export function sqsPublisherFactory(name: string, options: { readonly type: string }): Publisher {
  const fields = options as unknown as Fields;
  const issues: ConfigIssue[] = [];
  const queueUrl = required(name, fields, 'queueUrl', 'must be the URL of an SQS queue', issues);
  if (issues.length > 0) throw new ConfigError(issues);
  return createSqsPublisher({
    ...clientOptions(fields),
    name,
    queueUrl,
    messageGroupId: text(fields, 'messageGroupId'),
    maxMessageBytes: optionalNumber(fields, 'maxMessageBytes'),
  });
}

/** The factory of `type: sns` destinations. */
export function snsPublisherFactory(name: string, options: { readonly type: string }): Publisher {
  const fields = options as unknown as Fields;
  const issues: ConfigIssue[] = [];
  const topicArn = required(name, fields, 'topicArn', 'must be the ARN of an SNS topic', issues);
  if (issues.length > 0) throw new ConfigError(issues);
  return createSnsPublisher({
    ...clientOptions(fields),
    name,
    topicArn,
    messageGroupId: text(fields, 'messageGroupId'),
    maxMessageBytes: optionalNumber(fields, 'maxMessageBytes'),
  });
}

/** The factory of `type: eventbridge` destinations. */
export function eventBridgePublisherFactory(name: string, options: { readonly type: string }): Publisher {
  const fields = options as unknown as Fields;
  const issues: ConfigIssue[] = [];
  const source = required(
    name,
    fields,
    'source',
    "must be the events' Source, e.g. com.example.orders",
    issues,
  );
  if (issues.length > 0) throw new ConfigError(issues);
  return createEventBridgePublisher({
    ...clientOptions(fields),
    name,
    source,
    eventBus: text(fields, 'eventBus'),
    detailType: text(fields, 'detailType'),
    maxEventBytes: optionalNumber(fields, 'maxEventBytes'),
  });
}

/** Every AWS publisher factory by destination type, to spread into `createPublishers`' factories. */
export const awsPublisherFactories = {
  sqs: sqsPublisherFactory,
  sns: snsPublisherFactory,
  eventbridge: eventBridgePublisherFactory,
} as const;
