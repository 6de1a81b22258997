import { createKafkaEventHandler, type KafkaLambdaEvent } from '@queuebox/kafka';
import { createBrokerSourceHandler } from './lambda-shell/broker-source.ts';
import type { ShellOptions } from './lambda-shell/lambda.ts';

/**
 * kafka-source (MSK or self-managed Kafka event source mapping): stores every record in the inbox under the Kafka
 * source that lists its topic (default idempotency key `topic:partition:offset@timestamp`), then wakes relay-tick when a
 * push row was stored. Each topic-partition of the event is stored on its own, in offset order: a record that fails
 * stops its partition only, the other partitions are stored, then the invocation fails, so Lambda retries the batch;
 * stored records come back as duplicates. (Answering `batchItemFailures` instead needs the mapping's
 * ReportBatchItemFailures, which Lambda offers for Kafka in provisioned mode only: not turned on, see
 * packages/kafka/README.md.)
 */
export function createHandler(options: ShellOptions = {}) {
  return createBrokerSourceHandler<KafkaLambdaEvent>(
    {
      adapter: createKafkaEventHandler,
      logLine: 'kafka records stored',
      logFields: (event) => ({ eventSource: event.eventSource }),
    },
    options,
  );
}

export const handler = createHandler();
