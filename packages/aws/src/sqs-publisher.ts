import type { SendMessageBatchRequestEntry, SQSClient } from '@aws-sdk/client-sqs';
import type { Publisher } from '@queuebox/core';
import {
  type BatchEntryFailure,
  batchEntryResult,
  createAttributedPublisher,
} from './attributed-publisher.ts';
import { type AwsClientOptions, lazySdkClient, regionOfQueueUrl, sdkClientConfig } from './aws-client.ts';
import type { EntryResult } from './batch-publisher.ts';

/**
 * SQS's largest message (body plus attributes) and batch request, 1 MiB, and a queue's default `MaximumMessageSize`.
 * The SDK (`@aws-sdk/client-sqs`, SendMessageBatch): "The maximum allowed individual message size and the maximum
 * total payload size (the sum of the individual lengths of all of the batched messages) are both 1 MiB 1,048,576
 * bytes."; CreateQueue's `MaximumMessageSize`: "An integer from 1,024 bytes (1 KiB) up to 1,048,576 bytes (1 MiB).
 * Default: 1,048,576 bytes (1 MiB)."
 */
export const SQS_MAX_MESSAGE_BYTES = 1_048_576;
/** Entries of one `SendMessageBatch`. */
export const SQS_MAX_BATCH_ENTRIES = 10;

/** `destinations.<name>` of `type: sqs` (the validated configuration fits as it is). */
export interface SqsDestinationOptions extends AwsClientOptions {
  readonly type?: 'sqs';
  /** The queue URL; a name ending in `.fifo` is a FIFO queue. */
  readonly queueUrl: string;
  /** FIFO: the `MessageGroupId` of rows without a key. Default `queuebox`. */
  readonly messageGroupId?: string;
  /**
   * Largest message (body + attributes) the queue accepts, also the most bytes of one request; a larger row is
   * answered `dead` without a request. Default 1048576 (SQS's limit and a queue's default `MaximumMessageSize`). A
   * queue set lower refuses a larger message itself: that row is answered `dead` when SQS answers (the rest of its
   * request is sent), so setting the queue's size here only spares the request.
   */
  readonly maxMessageBytes?: number;
}

/** Options of the publisher: the destination plus tuning. */
export interface SqsPublisherOptions extends SqsDestinationOptions {
  /** The destination's name, for messages. Default `sqs`. */
  readonly name?: string;
  /** `SendMessageBatch` requests in flight at once. Default 8. */
  readonly maxConcurrentRequests?: number;
  /** A client to use instead of one built from the options (tests). It is not destroyed by `close`. */
  readonly client?: SQSClient;
}

/** Whether a queue URL names a FIFO queue. */
export function isFifoQueueUrl(queueUrl: string): boolean {
  return /\.fifo\/?$/.test(queueUrl);
}

/** Codes of a refused request that no retry can fix (its content); anything else retries. */
const PERMANENT_REQUEST_CODES: ReadonlySet<string> = new Set([
  'InvalidMessageContents',
  'BatchRequestTooLong',
  'MessageTooLong',
  'InvalidParameterValue',
  'InvalidParameterValueException',
  'TooManyEntriesInBatchRequest',
  'BatchEntryIdsNotDistinct',
  'InvalidBatchEntryId',
  'EmptyBatchRequest',
]);
// SQS names these codes with a prefix (`AWS.SimpleQueueService.BatchRequestTooLong` from AWS,
// `com.amazonaws.sqs#BatchRequestTooLong` from ElasticMQ): `isPermanentAwsError` removes it.

/** A per-entry failure of `SendMessageBatch`: a sender fault is the message's own (dead) unless it may pass. */
export function sqsEntryResult(failure: BatchEntryFailure): EntryResult {
  return batchEntryResult(failure, /throttl|kms|accessdenied|internal|unavailable/i);
}

/**
 * core's `Publisher` for an SQS queue, through `SendMessageBatch` (10 entries, `maxMessageBytes` per request).
 *
 * Each row: body = the JSON payload; message attributes = `message-id` (the message id) and the row's headers as
 * `String` attributes, mapped by the rules of `messageAttributes` (at most 10). A FIFO queue (URL ending `.fifo`)
 * also gets `MessageGroupId` = the row's key (or `messageGroupId` for rows without one; see `messageGroupIdOf`) and
 * `MessageDeduplicationId` = the message id, so SQS drops a repeat within its 5-minute window and keeps the rows of
 * a key in order (the poller sends one row per key at a time). A row larger than `maxMessageBytes`, or whose body
 * holds characters SQS refuses, is answered `dead` without a request. Per-entry results settle each row alone: a
 * sender fault → dead, anything else → retry.
 */
export function createSqsPublisher(options: SqsPublisherOptions): Publisher {
  const aws = lazySdkClient(
    () => import('@aws-sdk/client-sqs'),
    ({ SQSClient }) => new SQSClient(sdkClientConfig(options, regionOfQueueUrl(options.queueUrl))),
    options.client,
  );
  return createAttributedPublisher<SendMessageBatchRequestEntry>({
    service: 'SQS',
    name: options.name ?? 'sqs',
    fifo: isFifoQueueUrl(options.queueUrl),
    messageGroupId: options.messageGroupId,
    maxMessageBytes: options.maxMessageBytes ?? SQS_MAX_MESSAGE_BYTES,
    maxEntries: SQS_MAX_BATCH_ENTRIES,
    maxConcurrentRequests: options.maxConcurrentRequests,
    entry: (id, message) => ({
      Id: id,
      MessageBody: message.body,
      MessageAttributes: message.attributes,
      ...message.fifo,
    }),
    async sendBatch(entries, signal) {
      const { sdk, client } = await aws.get();
      return client.send(new sdk.SendMessageBatchCommand({ QueueUrl: options.queueUrl, Entries: entries }), {
        abortSignal: signal,
      });
    },
    entryResult: sqsEntryResult,
    permanentRequestCodes: PERMANENT_REQUEST_CODES,
    close: () => aws.close(),
  });
}
