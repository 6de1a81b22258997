import { createKafkaEventHandler, type KafkaLambdaEvent } from '@queuebox/kafka';
import { createBrokerSourceHandler } from './lambda-shell/broker-source.ts';
import type { ShellOptions } from './lambda-shell/lambda.ts';

/**
 * kafka-source (MSK or self-managed Kafka event source mapping): stores every record in the inbox under the Kafka
 * source that lists its topic (default idempotency key `topic:partition:offset@timestamp`), then wakes relay-tick when a
 * push row was stored. A failure fails the invocation, so Lambda retries the batch; stored records come back as
 * duplicates.
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
