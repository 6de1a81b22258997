import { type AmazonMqRabbitEvent, createAmazonMqHandler } from '@queuebox/rabbitmq';
import { createBrokerSourceHandler } from './lambda-shell/broker-source.ts';
import type { ShellOptions } from './lambda-shell/lambda.ts';

/**
 * amqp-source (Amazon MQ for RabbitMQ event source mapping): stores every message in the inbox under the AMQP
 * source of its queue (a message that is not JSON, or that the transform rejects, becomes a dead row), then wakes
 * relay-tick when a push row was stored. A failure fails the invocation and Lambda returns the batch to the queue.
 */
export function createHandler(options: ShellOptions = {}) {
  return createBrokerSourceHandler<AmazonMqRabbitEvent>(
    { adapter: createAmazonMqHandler, logLine: 'amazon mq messages stored' },
    options,
  );
}

export const handler = createHandler();
