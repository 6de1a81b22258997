import * as z from 'zod';
import { int, url } from './fields.ts';

// What SQS / SNS / EventBridge sources and destinations share: region, endpoint, queue URLs, FIFO groups.

const AWS_REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;
export const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/;
export const EVENT_BUS =
  /^([A-Za-z0-9._\-/]{1,256}|arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus\/[A-Za-z0-9._\-/]{1,256})$/;
// MessageGroupId: 1–128 alphanumerics and punctuation.
const MESSAGE_GROUP_ID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;

export const sqsQueueUrl = () =>
  url(['http', 'https'], 'SQS queue').superRefine((value, ctx) => {
    let path = '';
    try {
      path = new URL(value).pathname;
    } catch {
      return;
    }
    // A queue name is up to 80 characters, a FIFO queue's `.fifo` suffix included.
    if (!/^\/[^/]+\/([A-Za-z0-9_-]{1,75}\.fifo|[A-Za-z0-9_-]{1,80})\/?$/.test(path)) {
      ctx.addIssue({
        code: 'custom',
        message: 'must end in /<account>/<queue name> (a queue URL as SQS gives it)',
      });
    }
  });

/** Where the SDK connects: shared by every SQS / SNS / EventBridge source and destination. */
export const awsClientFields = {
  region: z
    .string()
    .regex(AWS_REGION, 'must be an AWS region such as eu-west-1')
    .optional()
    .describe(
      'AWS region. Default: the one in the queue URL or ARN, else the SDK chain (AWS_REGION), else us-east-1 with an endpoint.',
    ),
  endpoint: url(['http', 'https'], 'HTTP')
    .optional()
    .describe(
      "Another endpoint than AWS's, e.g. http://127.0.0.1:9324 (ElasticMQ). Credentials: the usual AWS chain.",
    ),
};

export const messageGroupId = () =>
  z
    .string()
    .regex(MESSAGE_GROUP_ID, 'must be 1–128 letters, digits or punctuation')
    .default('queuebox')
    .describe(
      'FIFO only: the MessageGroupId of rows without a key (rows with a key use it). Default queuebox.',
    );

/**
 * `maxMessageBytes` of an SQS (`queue`, default 1 MiB: SQS's limit and a new queue's default MaximumMessageSize) or
 * SNS (`topic`, default 256 KiB: PublishBatch's limit) destination.
 */
export const maxMessageBytes = (what: 'queue' | 'topic') => {
  const byDefault = what === 'queue' ? 1_048_576 : 262_144;
  const why =
    what === 'queue'
      ? "1048576 (1 MiB: SQS's limit and a new queue's default MaximumMessageSize; a queue set lower refuses the row, which is then retried until no attempt remains, then dead)"
      : '262144 (256 KiB)';
  return int(1024, 1_048_576)
    .default(byDefault)
    .describe(
      `Largest message (body + attributes) the ${what} accepts; a larger row is never sent: the outbox retries it like any failure, with backoff, until no attempt remains, then marks it dead. Default ${why}; at most 1048576.`,
    );
};
