import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage } from '@queuebox/core';
import { sleepUnlessAborted } from '@queuebox/core';
import { type AwsClientOptions, lazySdkClient, regionOfQueueUrl, sdkClientConfig } from './aws-client.ts';
import { sqsInboxMessage } from './sqs-messages.ts';
import { isFifoQueueUrl } from './sqs-publisher.ts';

/** `sources.<name>` of `type: sqs`, the fields the consumer reads (the validated configuration fits). */
export interface SqsSourceOptions extends AwsClientOptions {
  /** The queue URL. */
  readonly queueUrl: string;
  /** Messages per `ReceiveMessage`, 1–10. Default 10. */
  readonly batchSize?: number;
  /** Long-poll wait of one `ReceiveMessage`, 0–20 s. Default 20. */
  readonly waitTimeSeconds?: number;
}

/** Options of the long-polling consumer. */
export interface SqsConsumerOptions extends SqsSourceOptions {
  /** The source's name: what `ingest` is called with. */
  readonly source: string;
  readonly ingestion: BrokerIngestionPort;
  /**
   * When a message could not be stored (database down), it becomes visible again after this many seconds
   * (`ChangeMessageVisibility`) instead of after the queue's whole visibility timeout. Default 1.
   */
  readonly retryDelaySeconds?: number;
  /** A client to use instead of one built from the options (tests). It is not destroyed by `close`. */
  readonly client?: SQSClient;
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  readonly onError?: (error: unknown, context: { readonly during: 'receive' | 'ingest' | 'delete' }) => void;
}

/** What one receive did. */
export interface SqsReceiveReport {
  readonly received: number;
  readonly stored: number;
  readonly duplicate: number;
  readonly dead: number;
  /** Messages given back (visible again after `retryDelaySeconds`): their ingestion failed, or on a FIFO queue an earlier one's did. */
  readonly returned: number;
  readonly wakeRelay: boolean;
  /** The failure that stopped the receive, if any. */
  readonly error?: unknown;
}

/** A long-polling SQS consumer. */
export interface SqsConsumer {
  /** One `ReceiveMessage` (long poll), stores what came in order, deletes what was stored. Never throws. */
  receive(signal?: AbortSignal): Promise<SqsReceiveReport>;
  /**
   * Receives until `signal` aborts, pausing `errorDelayMs` (default 1000) after a failure, and `idleMs` (default
   * 250) after an empty short poll (`waitTimeSeconds: 0`; a long poll does its own waiting).
   */
  run(
    signal: AbortSignal,
    pauses?: { readonly errorDelayMs?: number; readonly idleMs?: number },
  ): Promise<void>;
  /** Aborts the poll in flight, then releases the client. */
  close(): Promise<void>;
}

/**
 * The local runtime's SQS source: long-polls the queue (`ReceiveMessage`, up to `batchSize` messages, waiting up to
 * `waitTimeSeconds`), stores each message through the broker ingestion in the order received, and deletes each one
 * only after its inbox row (pending or dead) committed (`DeleteMessageBatch`). A message whose ingestion fails is
 * made visible again after `retryDelaySeconds` (`ChangeMessageVisibilityBatch`); on a FIFO queue the rest of the
 * batch is given back with it untried, so a message group keeps its order. A body that is not JSON becomes a dead
 * row and is deleted: a poison message never blocks the queue.
 */
export function createSqsConsumer(options: SqsConsumerOptions): SqsConsumer {
  const fifo = isFifoQueueUrl(options.queueUrl);
  const batchSize = Math.min(10, Math.max(1, options.batchSize ?? 10));
  const waitTimeSeconds = Math.min(20, Math.max(0, options.waitTimeSeconds ?? 20));
  const retryDelaySeconds = options.retryDelaySeconds ?? 1;
  const aws = lazySdkClient(
    () => import('@aws-sdk/client-sqs'),
    ({ SQSClient }) =>
      new SQSClient({
        ...sdkClientConfig(options, regionOfQueueUrl(options.queueUrl)),
        // A long poll answers after up to 20 s.
        requestHandler: {
          connectionTimeout: options.connectionTimeoutMs ?? 3000,
          requestTimeout: (waitTimeSeconds + 10) * 1000,
        },
      }),
    options.client,
  );
  const polls = new Set<AbortController>();
  const report = (error: unknown, during: 'receive' | 'ingest' | 'delete') => {
    try {
      options.onError?.(error, { during });
    } catch {
      // A logging hook must not stop the consumer.
    }
  };

  async function receive(signal?: AbortSignal): Promise<SqsReceiveReport> {
    const counts = { received: 0, stored: 0, duplicate: 0, dead: 0, returned: 0 };
    let wakeRelay = false;
    const done = (error?: unknown): SqsReceiveReport => ({
      ...counts,
      wakeRelay,
      ...(error === undefined ? {} : { error }),
    });
    const poll = new AbortController();
    const forward = () => poll.abort();
    signal?.addEventListener('abort', forward, { once: true });
    polls.add(poll);
    let messages: Message[];
    let sqs: SQSClient;
    let commands: typeof import('@aws-sdk/client-sqs');
    try {
      ({ sdk: commands, client: sqs } = await aws.get());
      const answer = await sqs.send(
        new commands.ReceiveMessageCommand({
          QueueUrl: options.queueUrl,
          MaxNumberOfMessages: batchSize,
          WaitTimeSeconds: waitTimeSeconds,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
        { abortSignal: poll.signal },
      );
      messages = answer.Messages ?? [];
    } catch (error) {
      if (poll.signal.aborted) return done();
      report(error, 'receive');
      return done(error);
    } finally {
      polls.delete(poll);
      signal?.removeEventListener('abort', forward);
    }
    counts.received = messages.length;
    const stored: Message[] = [];
    const giveBack: Message[] = [];
    let failure: unknown;
    for (const message of messages) {
      if (failure !== undefined && fifo) {
        giveBack.push(message);
        continue;
      }
      const inbox = sqsInboxMessage({
        messageId: message.MessageId ?? '',
        body: message.Body ?? '',
        groupId: message.Attributes?.MessageGroupId,
        attributes: message.MessageAttributes,
      });
      try {
        const result = await options.ingestion.ingest(options.source, inbox);
        counts[result.status] += 1;
        wakeRelay ||= result.wakeRelay;
        stored.push(message);
        options.onIngested?.(result, inbox);
      } catch (error) {
        report(error, 'ingest');
        failure ??= error;
        giveBack.push(message);
      }
    }
    counts.returned = giveBack.length;
    try {
      if (stored.length > 0) {
        const answer = await sqs.send(
          new commands.DeleteMessageBatchCommand({
            QueueUrl: options.queueUrl,
            Entries: stored.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
          }),
        );
        // Not fatal: the rows are stored, so a redelivery only comes back as a duplicate.
        if ((answer.Failed ?? []).length > 0) {
          report(new Error(`DeleteMessageBatch failed for ${answer.Failed?.length} messages`), 'delete');
        }
      }
      if (giveBack.length > 0) {
        await sqs.send(
          new commands.ChangeMessageVisibilityBatchCommand({
            QueueUrl: options.queueUrl,
            Entries: giveBack.map((m, i) => ({
              Id: `v${i}`,
              ReceiptHandle: m.ReceiptHandle,
              VisibilityTimeout: retryDelaySeconds,
            })),
          }),
        );
      }
    } catch (error) {
      report(error, 'delete');
      failure ??= error;
    }
    return done(failure);
  }

  return {
    receive,
    async run(signal, pauses = {}) {
      while (!signal.aborted) {
        const result = await receive(signal);
        if (signal.aborted) break;
        // A long poll waits by itself; a short one (waitTimeSeconds 0) that found nothing must not spin.
        const wait =
          result.error !== undefined
            ? (pauses.errorDelayMs ?? 1000)
            : result.received === 0 && waitTimeSeconds === 0
              ? (pauses.idleMs ?? 250)
              : 0;
        if (wait === 0) continue;
        await sleepUnlessAborted(wait, signal);
      }
    },
    async close() {
      for (const poll of polls) poll.abort();
      await aws.close();
    },
  };
}
