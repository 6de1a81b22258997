import type { SQSClient } from '@aws-sdk/client-sqs';
import { createSqsEventHandler, type SqsEventReport } from '@queuebox/aws';
import { type BrokerIngestionPort, errorFields } from '@queuebox/core';
import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
import type { Services } from '@queuebox/use-cases';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { addCounts, publishGaugesAfterWrite } from './lambda-shell/gauges.ts';
import {
  createShell,
  lambda,
  type ShellOptions,
  STORE_TRY_MARGIN_MS,
  storeTryBeforeTimeout,
} from './lambda-shell/lambda.ts';

/**
 * sqs-source (SQS event source mapping with `ReportBatchItemFailures`): stores every message in the inbox under the
 * SQS source of its queue (a body that is not JSON, or that the transform rejects, becomes a dead row, and then the
 * inbox gauges are published), wakes relay-tick when a push row was stored, and answers `batchItemFailures` with
 * the messages that could not be stored (on a FIFO queue, the first such message and every later one), so Lambda
 * deletes the rest and only those return. The invocation succeeds, so Lambda's `Errors` never counts those: each
 * one handed back counts one `IngestFailures`, the counter its alarm reads. During a store outage the records
 * handed back get a visibility timeout that doubles with each receive (`ChangeMessageVisibilityBatch`, see
 * `createSqsEventHandler`), so the queue's `maxReceiveCount` spans a long outage; when that fails (a WARN) they
 * return after the queue's visibility timeout.
 *
 * A database that goes silent (connections open, no answer) holds a statement up to `database.queryTimeoutMs` (or
 * the Data API's 45 s), longer than the function's 30 s. Every store try therefore ends
 * {@link STORE_TRY_MARGIN_MS} before the invocation would time out, as a store outage: a function that timed out
 * would fail the whole batch, which returns after the queue's visibility timeout without the longer one, each
 * receive spending one of `maxReceiveCount`. A try that still commits after it was given up makes the record's
 * redelivery a duplicate.
 */
export function createHandler(
  options: ShellOptions & {
    /** The SQS client that changes the visibility of records handed back in an outage (tests). Default: the SDK's. */
    readonly sqsClient?: SQSClient;
  } = {},
) {
  // Not spread: the shell options of tests carry getters.
  const shell = createShell(options);
  const sqsClient = options.sqsClient;
  const wakeRelay = shell.wakeUp(FUNCTION_ENV.relayTickFunction);
  const adapters = new WeakMap<Services, (event: SQSEvent) => Promise<SqsEventReport>>();
  /** The invocation under way: its store tries end before its timeout. */
  let invocation: Context | undefined;
  return lambda(shell, async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    invocation = context;
    const { config, services, store } = await shell.cache.get();
    let handle = adapters.get(services);
    if (!handle) {
      const ingestion: BrokerIngestionPort = {
        ingest: (source, message) => {
          const work = services.brokerIngestion.ingest(source, message);
          return invocation === undefined ? work : storeTryBeforeTimeout(work, invocation);
        },
      };
      handle = createSqsEventHandler({
        ingestion,
        sources: config.sources,
        onFailure: (error, record) => {
          shell.logger.error('sqs message not stored; handed back', {
            messageId: record.messageId,
            error: errorFields(error),
          });
          // The records fail one by one instead of the invocation, so tell the cache what the middleware would.
          shell.cache.fail(error);
        },
        onVisibilityError: (error, queueUrl) => {
          shell.logger.warn(
            'sqs messages handed back in a store outage keep the queue visibility timeout; they return sooner',
            { queueUrl, error: errorFields(error) },
          );
        },
        ...(sqsClient === undefined ? {} : { sqsClient }),
      });
      adapters.set(services, handle);
    }
    const { response, ...report } = await handle(event);
    // A message stored dead moves the inbox DeadRows gauge (and its alarm) at once, as the broker sources do.
    if (report.dead > 0) await publishGaugesAfterWrite(shell, store, ['inbox']);
    // Counters that did not move are not emitted: each would be a billed custom metric saying 0.
    addCounts(shell.metrics, {
      [METRICS.accepted]: report.stored,
      [METRICS.duplicate]: report.duplicate,
      [METRICS.dead]: report.dead,
      // Handed back through batchItemFailures: SQS redelivers them, but no function error says so.
      [METRICS.ingestFailures]: report.failed,
    });
    const wokeRelay = report.wakeRelay && (await wakeRelay.request());
    shell.logger.info('sqs messages stored', { records: event.Records.length, ...report, wokeRelay });
    return response;
  });
}

export const handler = createHandler();
