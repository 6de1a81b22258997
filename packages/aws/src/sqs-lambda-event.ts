import type { BrokerBatchReport, BrokerIngestionPort, BrokerIngestResult } from '@queuebox/core';
import { ConfigError, QueueBoxError, StoreUnavailableError } from '@queuebox/core';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { sqsInboxMessage } from './sqs-messages.ts';

/** The sources slice the handler reads: SQS sources by name with their queue URLs. */
export type SqsSourcesByName = Readonly<
  Record<string, { readonly type: string; readonly queueUrl?: string }>
>;

/** Options of the Lambda handler. */
export interface SqsEventHandlerOptions {
  readonly ingestion: BrokerIngestionPort;
  /** `sources`: each record goes to the SQS source whose queue it came from. */
  readonly sources: SqsSourcesByName;
  readonly onIngested?: (result: BrokerIngestResult, record: SQSRecord) => void;
  /** Told about each record that could not be stored (it is reported as a batch item failure). */
  readonly onFailure?: (error: unknown, record: SQSRecord) => void;
}

/** What one event came to: the counts, and the response Lambda reads with `ReportBatchItemFailures`. */
export interface SqsEventReport extends BrokerBatchReport {
  /** Records handed back to the queue: their ingestion failed, or (FIFO) an earlier record of the batch failed. */
  readonly failed: number;
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
 */
export function createSqsEventHandler(
  options: SqsEventHandlerOptions,
): (event: SQSEvent) => Promise<SqsEventReport> {
  const byQueue = sourcesByQueue(options.sources);
  const only = [...new Set(byQueue.values())];
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
    let stopped = false;
    for (const record of event.Records) {
      if (stopped) {
        failures.push({ itemIdentifier: record.messageId });
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
        if (record.eventSourceARN.endsWith('.fifo') || error instanceof StoreUnavailableError) stopped = true;
      }
    }
    return { ...counts, wakeRelay, failed: failures.length, response: { batchItemFailures: failures } };
  };
}
