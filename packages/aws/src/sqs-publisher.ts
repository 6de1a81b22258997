import type { SendMessageBatchRequestEntry, SQSClient } from '@aws-sdk/client-sqs';
import type { ConfigIssue, OutgoingMessage, Publisher } from '@queuebox/core';
import { ConfigError } from '@queuebox/core';
import { attributedMessage, isMessageGroupId } from './attributes.ts';
import { type AwsClientOptions, regionOfQueueUrl, sdkClientConfig } from './aws-client.ts';
import { describeAwsError, isPermanentAwsError } from './aws-errors.ts';
import { createBatchPublisher, type EntryResult } from './batch-publisher.ts';

/** SQS's default (and, for most queues, configured) largest message: body plus attributes, 256 KiB. */
export const SQS_MAX_MESSAGE_BYTES = 262_144;
/** Entries of one `SendMessageBatch`. */
export const SQS_MAX_BATCH_ENTRIES = 10;
/** The message group of rows without a key on a FIFO queue, when the destination sets none. */
export const DEFAULT_MESSAGE_GROUP_ID = 'queuebox';

/** `destinations.<name>` of `type: sqs` (the validated configuration fits as it is). */
export interface SqsDestinationOptions extends AwsClientOptions {
  readonly type?: 'sqs';
  /** The queue URL; a name ending in `.fifo` is a FIFO queue. */
  readonly queueUrl: string;
  /** FIFO: the `MessageGroupId` of rows without a key. Default `queuebox`. */
  readonly messageGroupId?: string;
  /** Largest message (body + attributes) the queue accepts; larger rows go dead at once. Default 262144. */
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

/** A per-entry failure of `SendMessageBatch`: a sender fault is the message's own (dead) unless it may pass. */
export function sqsEntryResult(failure: {
  readonly Code?: string;
  readonly Message?: string;
  readonly SenderFault?: boolean;
}): EntryResult {
  const code = failure.Code ?? 'UnknownError';
  const transient = /throttl|kms|accessdenied|internal|unavailable/i.test(code);
  return {
    ok: false,
    retryable: !failure.SenderFault || transient,
    error: failure.Message && failure.Message !== code ? `${code}: ${failure.Message}` : code,
  };
}

/**
 * core's `Publisher` for an SQS queue, through `SendMessageBatch` (10 entries, `maxMessageBytes` per request).
 *
 * Each row: body = the JSON payload; message attributes = `message-id` (the outbox id) and the row's headers as
 * `String` attributes, mapped by the rules of `messageAttributes` (at most 10). A FIFO queue (URL ending `.fifo`)
 * also gets `MessageGroupId` = the row's key (or `messageGroupId` for rows without one; see `messageGroupIdOf`) and
 * `MessageDeduplicationId` = the outbox id, so SQS drops a repeat within its 5-minute window and keeps the rows of
 * a key in order (the poller sends one row per key at a time). A row larger than `maxMessageBytes`, or whose body
 * holds characters SQS refuses, goes dead without a request. Per-entry results settle each row alone: a sender
 * fault → dead, anything else → retry.
 */
export function createSqsPublisher(options: SqsPublisherOptions): Publisher {
  const name = options.name ?? 'sqs';
  const fifo = isFifoQueueUrl(options.queueUrl);
  const maxMessageBytes = options.maxMessageBytes ?? SQS_MAX_MESSAGE_BYTES;
  const defaultGroup = options.messageGroupId ?? DEFAULT_MESSAGE_GROUP_ID;
  const issues: ConfigIssue[] = [];
  if (!isMessageGroupId(defaultGroup)) {
    issues.push({
      path: `destinations.${name}.messageGroupId`,
      message: 'must be 1–128 letters, digits or punctuation',
    });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  let client: Promise<SQSClient> | undefined;
  const sdk = () => import('@aws-sdk/client-sqs');
  const currentClient = () => {
    client ??= options.client
      ? Promise.resolve(options.client)
      : sdk().then(
          ({ SQSClient }) => new SQSClient(sdkClientConfig(options, regionOfQueueUrl(options.queueUrl))),
        );
    return client;
  };

  return createBatchPublisher<SendMessageBatchRequestEntry>({
    name,
    service: 'SQS',
    maxEntries: SQS_MAX_BATCH_ENTRIES,
    maxBatchBytes: maxMessageBytes,
    maxConcurrentRequests: options.maxConcurrentRequests ?? 8,
    prepare(message: OutgoingMessage) {
      const prepared = attributedMessage(message, {
        service: 'SQS',
        name,
        maxMessageBytes,
        ...(fifo ? { fifoDefaultGroup: defaultGroup } : {}),
      });
      if ('dead' in prepared) return prepared;
      return {
        bytes: prepared.bytes,
        build: (id) => ({
          Id: id,
          MessageBody: prepared.body,
          MessageAttributes: prepared.attributes,
          ...prepared.fifo,
        }),
      };
    },
    async send(entries) {
      const [{ SendMessageBatchCommand }, sqs] = await Promise.all([sdk(), currentClient()]);
      const answer = await sqs.send(
        new SendMessageBatchCommand({ QueueUrl: options.queueUrl, Entries: entries.map((e) => e.entry) }),
      );
      const results = new Map<string, EntryResult>();
      for (const ok of answer.Successful ?? []) if (ok.Id) results.set(ok.Id, { ok: true });
      for (const failed of answer.Failed ?? []) if (failed.Id) results.set(failed.Id, sqsEntryResult(failed));
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
