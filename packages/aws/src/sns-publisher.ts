import type { PublishBatchRequestEntry, SNSClient } from '@aws-sdk/client-sns';
import type { ConfigIssue, OutgoingMessage, Publisher } from '@queuebox/core';
import { ConfigError } from '@queuebox/core';
import { attributedMessage, isMessageGroupId } from './attributes.ts';
import { type AwsClientOptions, regionOfArn, sdkClientConfig } from './aws-client.ts';
import { describeAwsError, isPermanentAwsError } from './aws-errors.ts';
import { createBatchPublisher, type EntryResult } from './batch-publisher.ts';
import { DEFAULT_MESSAGE_GROUP_ID } from './sqs-publisher.ts';

/** SNS's default largest message (body plus attributes) and request: 256 KiB (a topic may allow up to 1 MiB). */
export const SNS_MAX_MESSAGE_BYTES = 262_144;
/** Entries of one `PublishBatch`. */
export const SNS_MAX_BATCH_ENTRIES = 10;

/** `destinations.<name>` of `type: sns` (the validated configuration fits as it is). */
export interface SnsDestinationOptions extends AwsClientOptions {
  readonly type?: 'sns';
  /** The topic ARN; a name ending in `.fifo` is a FIFO topic. */
  readonly topicArn: string;
  /** FIFO: the `MessageGroupId` of rows without a key. Default `queuebox`. */
  readonly messageGroupId?: string;
  /** Largest message (body + attributes) the topic accepts (its `MaximumMessageSize`). Default 262144. */
  readonly maxMessageBytes?: number;
}

/** Options of the publisher: the destination plus tuning. */
export interface SnsPublisherOptions extends SnsDestinationOptions {
  /** The destination's name, for messages. Default `sns`. */
  readonly name?: string;
  /** `PublishBatch` requests in flight at once. Default 8. */
  readonly maxConcurrentRequests?: number;
  /** A client to use instead of one built from the options (tests). It is not destroyed by `close`. */
  readonly client?: SNSClient;
}

/** Whether a topic ARN names a FIFO topic. */
export function isFifoTopicArn(topicArn: string): boolean {
  return topicArn.endsWith('.fifo');
}

const PERMANENT_REQUEST_CODES: ReadonlySet<string> = new Set([
  'InvalidParameter',
  'InvalidParameterException',
  'InvalidParameterValue',
  'InvalidParameterValueException',
  'BatchRequestTooLong',
  'BatchRequestTooLongException',
  'TooManyEntriesInBatchRequest',
  'TooManyEntriesInBatchRequestException',
  'BatchEntryIdsNotDistinct',
  'BatchEntryIdsNotDistinctException',
  'InvalidBatchEntryId',
  'InvalidBatchEntryIdException',
  'EmptyBatchRequest',
  'EmptyBatchRequestException',
]);

/** A per-entry failure of `PublishBatch`: a sender fault is the message's own (dead) unless it may pass. */
export function snsEntryResult(failure: {
  readonly Code?: string;
  readonly Message?: string;
  readonly SenderFault?: boolean;
}): EntryResult {
  const code = failure.Code ?? 'UnknownError';
  const transient = /throttl|kms|authoriz|accessdenied|internal|unavailable|notfound/i.test(code);
  return {
    ok: false,
    retryable: !failure.SenderFault || transient,
    error: failure.Message && failure.Message !== code ? `${code}: ${failure.Message}` : code,
  };
}

/**
 * core's `Publisher` for an SNS topic, through `PublishBatch` (10 entries, `maxMessageBytes` per request).
 *
 * Each row: `Message` = the JSON payload; message attributes as for SQS (`message-id` = the outbox id, then the
 * row's headers, at most 10, mapped by `messageAttributes`); a FIFO topic (ARN ending `.fifo`) also gets
 * `MessageGroupId` = the key (or `messageGroupId`) and `MessageDeduplicationId` = the outbox id. Oversized rows and
 * bodies with characters SNS refuses go dead without a request; per-entry results settle each row alone.
 */
export function createSnsPublisher(options: SnsPublisherOptions): Publisher {
  const name = options.name ?? 'sns';
  const fifo = isFifoTopicArn(options.topicArn);
  const maxMessageBytes = options.maxMessageBytes ?? SNS_MAX_MESSAGE_BYTES;
  const defaultGroup = options.messageGroupId ?? DEFAULT_MESSAGE_GROUP_ID;
  const issues: ConfigIssue[] = [];
  if (!isMessageGroupId(defaultGroup)) {
    issues.push({
      path: `destinations.${name}.messageGroupId`,
      message: 'must be 1–128 letters, digits or punctuation',
    });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  let client: Promise<SNSClient> | undefined;
  const sdk = () => import('@aws-sdk/client-sns');
  const currentClient = () => {
    client ??= options.client
      ? Promise.resolve(options.client)
      : sdk().then(({ SNSClient }) => new SNSClient(sdkClientConfig(options, regionOfArn(options.topicArn))));
    return client;
  };

  return createBatchPublisher<PublishBatchRequestEntry>({
    name,
    service: 'SNS',
    maxEntries: SNS_MAX_BATCH_ENTRIES,
    maxBatchBytes: maxMessageBytes,
    maxConcurrentRequests: options.maxConcurrentRequests ?? 8,
    prepare(message: OutgoingMessage) {
      const prepared = attributedMessage(message, {
        service: 'SNS',
        name,
        maxMessageBytes,
        ...(fifo ? { fifoDefaultGroup: defaultGroup } : {}),
      });
      if ('dead' in prepared) return prepared;
      return {
        bytes: prepared.bytes,
        build: (id) => ({
          Id: id,
          Message: prepared.body,
          MessageAttributes: prepared.attributes,
          ...prepared.fifo,
        }),
      };
    },
    async send(entries) {
      const [{ PublishBatchCommand }, sns] = await Promise.all([sdk(), currentClient()]);
      const answer = await sns.send(
        new PublishBatchCommand({
          TopicArn: options.topicArn,
          PublishBatchRequestEntries: entries.map((e) => e.entry),
        }),
      );
      const results = new Map<string, EntryResult>();
      for (const ok of answer.Successful ?? []) if (ok.Id) results.set(ok.Id, { ok: true });
      for (const failed of answer.Failed ?? []) if (failed.Id) results.set(failed.Id, snsEntryResult(failed));
      return results;
    },
    classify: (error) => ({
      retryable: !isPermanentAwsError(error, PERMANENT_REQUEST_CODES),
      error: describeAwsError(error),
    }),
    async close() {
      const open = client;
      client = undefined;
      if (open && !options.client) (await open.catch(() => undefined))?.destroy();
    },
  });
}
