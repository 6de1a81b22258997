import { kafkaPublisherFactory } from '@queuebox/kafka';
import { natsPublisherFactory } from '@queuebox/nats';
import { defaultPublisherFactories } from '@queuebox/outbox';
import { rabbitmqPublisherFactory } from '@queuebox/rabbitmq';
import type { Context } from 'aws-lambda';
import {
  createShell,
  lambda,
  METRIC,
  MetricUnit,
  type ShellOptions,
  type TickEvent,
  triggerOf,
} from './shell/lambda.ts';

/** Every destination type has a publisher here: http, rabbitmq, kafka, nats. */
const publisherFactories = {
  ...defaultPublisherFactories,
  rabbitmq: rabbitmqPublisherFactory,
  kafka: kafkaPublisherFactory,
  nats: natsPublisherFactory,
};

/**
 * outbox-tick (EventBridge schedule and wake-ups): reclaims expired leases, then claims, delivers and settles
 * batches until no row is claimable or the invocation's remaining time minus the safety margin is spent.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options, { services: { publisherFactories } });
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const { services } = await shell.cache.get();
    const report = await services.poller.drain({ deadline: shell.deadline(context) });
    shell.metrics.addMetric(METRIC.sent, MetricUnit.Count, report.sent);
    shell.metrics.addMetric(METRIC.retried, MetricUnit.Count, report.retried + report.reclaimed.returned);
    shell.metrics.addMetric(METRIC.dead, MetricUnit.Count, report.dead + report.reclaimed.dead);
    shell.metrics.addMetric(METRIC.stale, MetricUnit.Count, report.stale);
    shell.logger.info('outbox drain', { trigger: triggerOf(event), ...report });
    return report;
  });
}

export const handler = createHandler();
