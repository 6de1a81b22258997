import { createKafkaEventHandler, type KafkaLambdaEvent } from '@queuebox/kafka';
import type { Services } from '@queuebox/services';
import { createShell, ENV, lambda, METRIC, MetricUnit, type ShellOptions } from './shell/lambda.ts';

/**
 * kafka-source (MSK or self-managed Kafka event source mapping): stores every record in the inbox under the Kafka
 * source that lists its topic (default idempotency key `topic:partition:offset`), then wakes relay-tick when a
 * push row was stored. A failure fails the invocation, so Lambda retries the batch; stored records come back as
 * duplicates.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeRelay = shell.wakeUp(ENV.relayTickFunction);
  const handlers = new WeakMap<Services, ReturnType<typeof createKafkaEventHandler>>();
  return lambda(shell, async (event: KafkaLambdaEvent) => {
    const { config, services } = await shell.cache.get();
    let handle = handlers.get(services);
    if (!handle) {
      handle = createKafkaEventHandler({ ingestion: services.brokerIngestion, sources: config.sources });
      handlers.set(services, handle);
    }
    const report = await handle(event);
    shell.metrics.addMetric(METRIC.accepted, MetricUnit.Count, report.stored);
    shell.metrics.addMetric(METRIC.duplicate, MetricUnit.Count, report.duplicate);
    shell.metrics.addMetric(METRIC.dead, MetricUnit.Count, report.dead);
    const wokeRelay = report.wakeRelay && (await wakeRelay.request());
    shell.logger.info('kafka records stored', { eventSource: event.eventSource, ...report, wokeRelay });
    return report;
  });
}

export const handler = createHandler();
