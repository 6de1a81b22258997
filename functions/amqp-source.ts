import { type AmazonMqRabbitEvent, createAmazonMqHandler } from '@queuebox/rabbitmq';
import type { Services } from '@queuebox/services';
import { createShell, ENV, lambda, METRIC, MetricUnit, type ShellOptions } from './shell/lambda.ts';

/**
 * amqp-source (Amazon MQ for RabbitMQ event source mapping): stores every message in the inbox under the AMQP
 * source of its queue (a message that is not JSON, or that the transform rejects, becomes a dead row), then wakes
 * relay-tick when a push row was stored. A failure fails the invocation and Lambda returns the batch to the queue.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeRelay = shell.wakeUp(ENV.relayTickFunction);
  const handlers = new WeakMap<Services, ReturnType<typeof createAmazonMqHandler>>();
  return lambda(shell, async (event: AmazonMqRabbitEvent) => {
    const { config, services } = await shell.cache.get();
    let handle = handlers.get(services);
    if (!handle) {
      handle = createAmazonMqHandler({ ingestion: services.brokerIngestion, sources: config.sources });
      handlers.set(services, handle);
    }
    const report = await handle(event);
    shell.metrics.addMetric(METRIC.accepted, MetricUnit.Count, report.stored);
    shell.metrics.addMetric(METRIC.duplicate, MetricUnit.Count, report.duplicate);
    shell.metrics.addMetric(METRIC.dead, MetricUnit.Count, report.dead);
    const wokeRelay = report.wakeRelay && (await wakeRelay.request());
    shell.logger.info('amazon mq messages stored', { ...report, wokeRelay });
    return report;
  });
}

export const handler = createHandler();
