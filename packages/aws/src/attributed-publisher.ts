import type { ConfigIssue, OutgoingMessage, Publisher } from '@queuebox/core';
import { ConfigError } from '@queuebox/core';
import { type AttributedMessage, attributedMessage, isMessageGroupId } from './attributes.ts';
import { describeAwsError, isPermanentAwsError } from './aws-errors.ts';
import { createBatchPublisher, type EntryResult } from './batch-publisher.ts';

/** The message group of rows without a key on a FIFO queue or topic, when the destination sets none. */
export const DEFAULT_MESSAGE_GROUP_ID = 'queuebox';

/** A per-entry failure of a batch request, as SQS's `SendMessageBatch` and SNS's `PublishBatch` report it. */
export interface BatchEntryFailure {
  readonly Code?: string;
  readonly Message?: string;
  readonly SenderFault?: boolean;
}

/**
 * A per-entry failure as an outcome: a sender fault is the message's own (dead) unless its code matches
 * `transient` (throttling, keys, permissions, the service's own faults: they may pass); anything else retries.
 */
export function batchEntryResult(failure: BatchEntryFailure, transient: RegExp): EntryResult {
  const code = failure.Code ?? 'UnknownError';
  return {
    ok: false,
    retryable: !failure.SenderFault || transient.test(code),
    error: failure.Message && failure.Message !== code ? `${code}: ${failure.Message}` : code,
  };
}

/** What an SQS or SNS publisher is made of (see {@link createAttributedPublisher}). */
export interface AttributedPublisherSpec<Entry> {
  readonly service: 'SQS' | 'SNS';
  /** The destination's name, for messages and configuration paths. */
  readonly name: string;
  /** Whether the queue or topic is FIFO: then every entry gets `MessageGroupId` and `MessageDeduplicationId`. */
  readonly fifo: boolean;
  /** FIFO: the group of rows without a key. Default {@link DEFAULT_MESSAGE_GROUP_ID}. */
  readonly messageGroupId?: string | undefined;
  /** Largest message (body + attributes), also the largest request. */
  readonly maxMessageBytes: number;
  /** Entries of one request. */
  readonly maxEntries: number;
  /** Requests in flight at once. Default 8. */
  readonly maxConcurrentRequests?: number | undefined;
  /** The service's batch entry of a message: the body goes into the field the API names. */
  readonly entry: (id: string, message: AttributedMessage) => Entry;
  /**
   * Sends one batch request and answers the API's per-entry results; `signal` aborts it once no publish awaits the
   * answer (the SDK's `abortSignal`).
   */
  readonly sendBatch: (
    entries: Entry[],
    signal: AbortSignal,
  ) => Promise<{
    readonly Successful?: readonly { readonly Id?: string | undefined }[] | undefined;
    readonly Failed?: readonly (BatchEntryFailure & { readonly Id?: string | undefined })[] | undefined;
  }>;
  /** A per-entry failure as an outcome (`batchEntryResult` with the service's transient codes). */
  readonly entryResult: (failure: BatchEntryFailure) => EntryResult;
  /** Codes of a refused request that no retry can fix (its content); any other failed request retries. */
  readonly permanentRequestCodes: ReadonlySet<string>;
  /** Releases the client. */
  readonly close: () => Promise<void>;
}

/**
 * core's `Publisher` for SQS and SNS, whose batch APIs take the same message: the JSON payload as the body, message
 * attributes = `message-id` (the message id) and the row's headers (at most 10, mapped by `messageAttributes`), and
 * on a FIFO queue or topic `MessageGroupId` = the row's key (or `messageGroupId`) and `MessageDeduplicationId` = the
 * message id. A row larger than `maxMessageBytes`, or whose body holds characters the service refuses, is answered
 * `dead` without a request; per-entry results settle each row alone. Throws `ConfigError` for an unusable
 * `messageGroupId`.
 */
export function createAttributedPublisher<Entry>(spec: AttributedPublisherSpec<Entry>): Publisher {
  const { service, name, maxMessageBytes } = spec;
  const defaultGroup = spec.messageGroupId ?? DEFAULT_MESSAGE_GROUP_ID;
  const issues: ConfigIssue[] = [];
  if (!isMessageGroupId(defaultGroup)) {
    issues.push({
      path: `destinations.${name}.messageGroupId`,
      message: 'must be 1–128 letters, digits or punctuation',
    });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return createBatchPublisher<Entry>({
    name,
    service,
    maxEntries: spec.maxEntries,
    maxBatchBytes: maxMessageBytes,
    maxConcurrentRequests: spec.maxConcurrentRequests ?? 8,
    prepare(message: OutgoingMessage) {
      const prepared = attributedMessage(message, {
        service,
        name,
        maxMessageBytes,
        ...(spec.fifo ? { fifoDefaultGroup: defaultGroup } : {}),
      });
      if ('dead' in prepared) return prepared;
      return { bytes: prepared.bytes, build: (id) => spec.entry(id, prepared) };
    },
    async send(entries, signal) {
      const answer = await spec.sendBatch(
        entries.map((e) => e.entry),
        signal,
      );
      const results = new Map<string, EntryResult>();
      for (const ok of answer.Successful ?? []) if (ok.Id) results.set(ok.Id, { ok: true });
      for (const failed of answer.Failed ?? [])
        if (failed.Id) results.set(failed.Id, spec.entryResult(failed));
      return results;
    },
    classify: (error) => ({
      retryable: !isPermanentAwsError(error, spec.permanentRequestCodes),
      error: describeAwsError(error),
    }),
    close: spec.close,
  });
}
