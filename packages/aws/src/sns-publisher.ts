import type { PublishBatchRequestEntry, SNSClient } from '@aws-sdk/client-sns';
import type { Publisher } from '@queuebox/core';
import {
  type BatchEntryFailure,
  batchEntryResult,
  createAttributedPublisher,
} from './attributed-publisher.ts';
import { type AwsClientOptions, lazySdkClient, regionOfArn, sdkClientConfig } from './aws-client.ts';
import type { EntryResult } from './batch-publisher.ts';

/**
 * SNS's default largest message (body plus attributes) and request: 256 KiB (a topic may allow up to 1 MiB). The SDK
 * (`@aws-sdk/client-sns`, PublishBatch): "The maximum allowed individual message size and the maximum total payload
 * size (the sum of the individual lengths of all of the batched messages) are both 256 KiB (262,144 bytes). To
 * publish larger batches, set the topic's MaximumMessageSize attribute, which supports values up to 1 MiB
 * (1,048,576 bytes)."
 */
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

/** Codes of a refused request that no retry can fix (its content); anything else retries. */
const PERMANENT_REQUEST_CODES: ReadonlySet<string> = new Set([
  // A client fault: the request does not satisfy the API's constraints.
  'ValidationException',
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
export function snsEntryResult(failure: BatchEntryFailure): EntryResult {
  return batchEntryResult(failure, /throttl|kms|authoriz|accessdenied|internal|unavailable|notfound/i);
}

/**
 * core's `Publisher` for an SNS topic, through `PublishBatch` (10 entries, `maxMessageBytes` per request).
 *
 * Each row: `Message` = the JSON payload; message attributes as for SQS (`message-id` = the message id, then the
 * row's headers, at most 10, mapped by `messageAttributes`); a FIFO topic (ARN ending `.fifo`) also gets
 * `MessageGroupId` = the key (or `messageGroupId`) and `MessageDeduplicationId` = the message id. Oversized rows and
 * bodies with characters SNS refuses are answered `dead` without a request; per-entry results settle each row alone.
 */
export function createSnsPublisher(options: SnsPublisherOptions): Publisher {
  const aws = lazySdkClient(
    () => import('@aws-sdk/client-sns'),
    ({ SNSClient }) => new SNSClient(sdkClientConfig(options, regionOfArn(options.topicArn))),
    options.client,
  );
  return createAttributedPublisher<PublishBatchRequestEntry>({
    service: 'SNS',
    name: options.name ?? 'sns',
    fifo: isFifoTopicArn(options.topicArn),
    messageGroupId: options.messageGroupId,
    maxMessageBytes: options.maxMessageBytes ?? SNS_MAX_MESSAGE_BYTES,
    maxEntries: SNS_MAX_BATCH_ENTRIES,
    maxConcurrentRequests: options.maxConcurrentRequests,
    entry: (id, message) => ({
      Id: id,
      Message: message.body,
      MessageAttributes: message.attributes,
      ...message.fifo,
    }),
    async sendBatch(entries, signal) {
      const { sdk, client } = await aws.get();
      return client.send(
        new sdk.PublishBatchCommand({ TopicArn: options.topicArn, PublishBatchRequestEntries: entries }),
        { abortSignal: signal },
      );
    },
    entryResult: snsEntryResult,
    permanentRequestCodes: PERMANENT_REQUEST_CODES,
    close: () => aws.close(),
  });
}
