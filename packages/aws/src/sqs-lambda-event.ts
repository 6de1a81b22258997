import type { SQSClient } from '@aws-sdk/client-sqs';
import type { BrokerBatchReport, BrokerIngestionPort, BrokerIngestResult } from '@queuebox/core';
import { ConfigError, isStoreUnavailable, QueueBoxError } from '@queuebox/core';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import {
  type AwsClientOptions,
  type LazySdkClient,
  lazySdkClient,
  regionOfQueueUrl,
  sdkClientConfig,
} from './aws-client.ts';
import { sqsInboxMessage } from './sqs-messages.ts';

/** The sources slice the handler reads: SQS sources by name with their queue URLs (and where their client connects). */
export type SqsSourcesByName = Readonly<
  Record<string, { readonly type: string; readonly queueUrl?: string } & AwsClientOptions>
>;

/**
 * SQS's longest visibility of a message, counted from its receive: a ChangeMessageVisibility that would make it
 * longer is rejected.
 */
export const SQS_MAX_VISIBILITY_SECONDS = 43_200;

/**
 * The visibility timeout of a record not stored during a store outage: the queue's visibility timeout VT doubled for
 * each receive before this one (`ApproximateReceiveCount` n: `VT × 2^(n−1)`), at most `12 h − VT`; `undefined`
 * (leave it alone) when that is less than VT, i.e. for a queue whose VT is over 6 h.
 *
 * The cap is what is left of SQS's 12 h after the longest time the record can have been in flight before the call:
 * the event source mapping's batching window (MaximumBatchingWindowInSeconds, up to 300 s), the invocations Lambda
 * retries while the function is throttled, and the invocation's own run (up to 900 s) all lie within the receive's
 * visibility timeout, VT; past it the message is no longer in flight and no change applies anyway. (A fixed
 * 15-minute margin ignored the batching window and the throttled retries: with VT = 5400 s, the six times a 900 s
 * function that AWS advises, a record received at the start of a 300 s window and handed back 850 s into its
 * invocation asked for 1150 + 42 300 s, which SQS refuses.) A value under VT would bring the record back sooner than
 * the queue's own timeout does.
 */
export function outageVisibilitySeconds(queueSeconds: number, receiveCount: number): number | undefined {
  const n = Number.isFinite(receiveCount) && receiveCount >= 1 ? Math.floor(receiveCount) : 1;
  const base = Math.max(1, Math.ceil(queueSeconds));
  const seconds = Math.min(SQS_MAX_VISIBILITY_SECONDS - base, Math.round(base * 2 ** Math.min(n - 1, 30)));
  return seconds >= base ? seconds : undefined;
}

/** Options of the Lambda handler. */
export interface SqsEventHandlerOptions {
  readonly ingestion: BrokerIngestionPort;
  /** `sources`: each record goes to the SQS source whose queue it came from. */
  readonly sources: SqsSourcesByName;
  readonly onIngested?: (result: BrokerIngestResult, record: SQSRecord) => void;
  /** Told about each record that could not be stored (it is reported as a batch item failure). */
  readonly onFailure?: (error: unknown, record: SQSRecord) => void;
  /**
   * The SQS client for `GetQueueAttributes` and `ChangeMessageVisibilityBatch` during a store outage (tests). Default:
   * one per source, made on first use from its `queueUrl` (region) and `endpoint`; `false`: leave the visibility
   * alone (every record handed back returns after the queue's visibility timeout, as before).
   */
  readonly sqsClient?: SQSClient | false;
  /**
   * Told when keeping records away failed (the queue's attributes could not be read, `ChangeMessageVisibilityBatch`
   * failed, or some of its entries did): those records return after the queue's visibility timeout; nothing is lost.
   */
  readonly onVisibilityError?: (error: unknown, queueUrl: string) => void;
}

/** What one event came to: the counts, and the response Lambda reads with `ReportBatchItemFailures`. */
export interface SqsEventReport extends BrokerBatchReport {
  /** Records handed back to the queue: their ingestion failed, or (FIFO) an earlier record of the batch failed. */
  readonly failed: number;
  /** Of `failed`, the records handed back during a store outage whose visibility timeout was made longer. */
  readonly keptAway: number;
  readonly response: SQSBatchResponse;
}

/** No configured SQS source reads the queue of a record. */
export class UnmappedQueueError extends QueueBoxError {}

/** `account:name` of a queue ARN (`arn:aws:sqs:eu-west-1:123456789012:orders` → `123456789012:orders`). */
function queueOfArn(arn: string): string | undefined {
  const parts = arn.split(':');
  return parts.length >= 6 && parts[0] === 'arn' ? `${parts[4]}:${parts.slice(5).join(':')}` : undefined;
}

/** `account:name` of a queue URL (`https://sqs.…/123456789012/orders` → `123456789012:orders`). */
function queueOfUrl(url: string): string | undefined {
  try {
    const segments = new URL(url).pathname.split('/').filter((s) => s !== '');
    return segments.length >= 2 ? `${segments.at(-2)}:${segments.at(-1)}` : undefined;
  } catch {
    return undefined;
  }
}

/** The SQS source of each queue (`account:name`); a queue read by two sources is a configuration error. */
export function sourcesByQueue(sources: SqsSourcesByName): Map<string, string> {
  const byQueue = new Map<string, string>();
  const issues: { path: string; message: string }[] = [];
  for (const [name, source] of Object.entries(sources)) {
    if (source.type !== 'sqs' || source.queueUrl === undefined) continue;
    const queue = queueOfUrl(source.queueUrl);
    if (queue === undefined) continue;
    const taken = byQueue.get(queue);
    if (taken !== undefined) {
      issues.push({ path: `sources.${name}.queueUrl`, message: `is also read by source ${taken}` });
    } else byQueue.set(queue, name);
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return byQueue;
}

/**
 * The body of functions/sqs-source.ts (an SQS event source mapping with `ReportBatchItemFailures`): stores every
 * record of the event in the inbox under the SQS source of its queue, in the event's order, and answers which
 * records go back to the queue. A body that is not JSON, or that the transform rejects, becomes a dead row and counts
 * as handled, so a poison message never blocks its batch. A record whose ingestion fails (the database is down) is
 * reported in `batchItemFailures`; on a standard queue the others go on, on a FIFO queue every later record of the
 * batch is reported too without being tried (Lambda's rule for FIFO, so a group keeps its order). When the database
 * is unavailable the rest of the batch is reported at once.
 *
 * A store outage (ingestion rejects with core's `StoreUnavailableError`, also as a cause) would otherwise cost every
 * record one receive per visibility timeout, and the queue's redrive policy (`maxReceiveCount`) would move them to
 * the dead-letter queue after a short outage. So before they are reported, the records not stored (the one that
 * met the outage and every later one) get a longer visibility timeout (`ChangeMessageVisibilityBatch`): the queue's
 * own (`GetQueueAttributes`, read once per queue) doubled for each receive before this one, `VT × 2^(n−1)` for
 * `ApproximateReceiveCount` n, at most `12 h − VT` ({@link outageVisibilitySeconds}; a queue whose VT is over 6 h is
 * left alone). A message is then received at
 * 0, VT, 3·VT, 7·VT, … after its first receive: with `maxReceiveCount` N it goes to the dead-letter queue only
 * after an outage of more than `VT × (2^(N−1) − 1)` (N = 5, VT = 30 s: 7.5 minutes). When that fails, the records
 * are still reported and return after the queue's visibility timeout, as they did before.
 */
export function createSqsEventHandler(
  options: SqsEventHandlerOptions,
): (event: SQSEvent) => Promise<SqsEventReport> {
  const byQueue = sourcesByQueue(options.sources);
  const only = [...new Set(byQueue.values())];
  const keepAway = outageVisibility(options);
  const sourceOf = (record: SQSRecord): string => {
    const queue = queueOfArn(record.eventSourceARN);
    const source =
      (queue === undefined ? undefined : byQueue.get(queue)) ?? (only.length === 1 ? only[0] : undefined);
    if (source === undefined) {
      throw new UnmappedQueueError(`No SQS source reads the queue ${record.eventSourceARN}`, {
        context: { eventSourceARN: record.eventSourceARN },
      });
    }
    return source;
  };

  return async (event) => {
    const counts = { stored: 0, duplicate: 0, dead: 0 };
    let wakeRelay = false;
    const failures: { itemIdentifier: string }[] = [];
    /** Records not stored because of a store outage, with their sources: their visibility is made longer. */
    const notStored: { readonly record: SQSRecord; readonly source: string }[] = [];
    let stopped = false;
    let outage = false;
    for (const record of event.Records) {
      if (stopped) {
        failures.push({ itemIdentifier: record.messageId });
        if (outage) {
          const source = sourceOrUndefined(record);
          if (source !== undefined) notStored.push({ record, source });
        }
        continue;
      }
      try {
        const result = await options.ingestion.ingest(
          sourceOf(record),
          sqsInboxMessage({
            messageId: record.messageId,
            body: record.body,
            groupId: record.attributes.MessageGroupId,
            attributes: record.messageAttributes,
          }),
        );
        counts[result.status] += 1;
        wakeRelay ||= result.wakeRelay;
        options.onIngested?.(result, record);
      } catch (error) {
        options.onFailure?.(error, record);
        failures.push({ itemIdentifier: record.messageId });
        if (isStoreUnavailable(error)) {
          outage = true;
          const source = sourceOrUndefined(record);
          if (source !== undefined) notStored.push({ record, source });
        }
        if (record.eventSourceARN.endsWith('.fifo') || outage) stopped = true;
      }
    }
    const keptAway = notStored.length > 0 ? await keepAway(notStored) : 0;
    return {
      ...counts,
      wakeRelay,
      failed: failures.length,
      keptAway,
      response: { batchItemFailures: failures },
    };
  };

  function sourceOrUndefined(record: SQSRecord): string | undefined {
    try {
      return sourceOf(record);
    } catch {
      return undefined;
    }
  }
}

/** Entries per `ChangeMessageVisibilityBatch` (SQS's limit), and calls at once. */
const VISIBILITY_BATCH = 10;
const VISIBILITY_CALLS_AT_ONCE = 8;

/**
 * Makes the visibility timeout of records not stored during an outage longer (see createSqsEventHandler); resolves
 * with how many records it was set for. Never throws: a failure is told to `onVisibilityError` and leaves those
 * records to the queue's visibility timeout.
 */
function outageVisibility(
  options: SqsEventHandlerOptions,
): (records: readonly { readonly record: SQSRecord; readonly source: string }[]) => Promise<number> {
  type Sqs = typeof import('@aws-sdk/client-sqs');
  const clients = new Map<string, LazySdkClient<Sqs, SQSClient>>();
  /** The queue's visibility timeout, per queue URL; a failed read is forgotten, so the next outage asks again. */
  const queueSeconds = new Map<string, Promise<number>>();
  const tell = (error: unknown, queueUrl: string) => {
    try {
      options.onVisibilityError?.(error, queueUrl);
    } catch {
      // A logging hook must not fail the batch.
    }
  };
  const clientOf = (source: string, queueUrl: string) => {
    let client = clients.get(source);
    if (!client) {
      const settings = options.sources[source] ?? { type: 'sqs' };
      client = lazySdkClient(
        () => import('@aws-sdk/client-sqs'),
        ({ SQSClient }) =>
          new SQSClient(
            sdkClientConfig(
              {
                ...settings,
                // Inside an invocation that has already failed its records: short, so the answer is not late.
                connectionTimeoutMs: Math.min(settings.connectionTimeoutMs ?? 2000, 2000),
                requestTimeoutMs: Math.min(settings.requestTimeoutMs ?? 5000, 5000),
              },
              regionOfQueueUrl(queueUrl),
            ),
          ),
        options.sqsClient === false ? undefined : options.sqsClient,
      );
      clients.set(source, client);
    }
    return client;
  };
  const visibilityOf = (sdk: Sqs, sqs: SQSClient, queueUrl: string): Promise<number> => {
    let known = queueSeconds.get(queueUrl);
    if (!known) {
      known = sqs
        .send(
          new sdk.GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['VisibilityTimeout'] }),
        )
        .then((answer) => {
          const seconds = Number(answer.Attributes?.VisibilityTimeout);
          if (!Number.isFinite(seconds) || seconds < 0) {
            throw new Error(`GetQueueAttributes gave no VisibilityTimeout for ${queueUrl}`);
          }
          return seconds;
        });
      queueSeconds.set(queueUrl, known);
      known.catch(() => queueSeconds.delete(queueUrl));
    }
    return known;
  };

  return async (records) => {
    if (options.sqsClient === false) return 0;
    const byQueue = new Map<string, { source: string; records: SQSRecord[] }>();
    for (const { record, source } of records) {
      const queueUrl = options.sources[source]?.queueUrl;
      if (queueUrl === undefined || record.receiptHandle === undefined) continue;
      const entry = byQueue.get(queueUrl) ?? { source, records: [] };
      entry.records.push(record);
      byQueue.set(queueUrl, entry);
    }
    let kept = 0;
    for (const [queueUrl, { source, records: queued }] of byQueue) {
      let sdk: Sqs;
      let sqs: SQSClient;
      let seconds: number;
      try {
        ({ sdk, client: sqs } = await clientOf(source, queueUrl).get());
        seconds = await visibilityOf(sdk, sqs, queueUrl);
      } catch (error) {
        tell(error, queueUrl);
        continue;
      }
      // Only the records a longer visibility applies to (none on a queue whose VT is over 6 h).
      const entries: { readonly record: SQSRecord; readonly visibility: number }[] = [];
      for (const record of queued) {
        const visibility = outageVisibilitySeconds(
          seconds,
          Number(record.attributes.ApproximateReceiveCount),
        );
        if (visibility !== undefined) entries.push({ record, visibility });
      }
      const batches: (typeof entries)[number][][] = [];
      for (let at = 0; at < entries.length; at += VISIBILITY_BATCH) {
        batches.push(entries.slice(at, at + VISIBILITY_BATCH));
      }
      const change = async (batch: (typeof entries)[number][]): Promise<number> => {
        try {
          const answer = await sqs.send(
            new sdk.ChangeMessageVisibilityBatchCommand({
              QueueUrl: queueUrl,
              Entries: batch.map(({ record, visibility }, i) => ({
                Id: `v${i}`,
                ReceiptHandle: record.receiptHandle,
                VisibilityTimeout: visibility,
              })),
            }),
          );
          const failed = answer.Failed ?? [];
          if (failed.length > 0) {
            tell(
              new Error(
                `ChangeMessageVisibilityBatch failed for ${failed.length} of ${batch.length} messages: ${failed[0]?.Code ?? ''} ${failed[0]?.Message ?? ''}`.trim(),
              ),
              queueUrl,
            );
          }
          return batch.length - failed.length;
        } catch (error) {
          tell(error, queueUrl);
          return 0;
        }
      };
      for (let at = 0; at < batches.length; at += VISIBILITY_CALLS_AT_ONCE) {
        const done = await Promise.all(batches.slice(at, at + VISIBILITY_CALLS_AT_ONCE).map(change));
        for (const n of done) kept += n;
      }
    }
    return kept;
  };
}
