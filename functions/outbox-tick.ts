import { awsPublisherFactories } from '@queuebox/aws';
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

/**
 * Every destination type has a publisher here: http, rabbitmq, kafka, nats, sqs, sns, eventbridge. The AWS SDK clients
 * of the last three are imported on first publish only (and come from the Lambda runtime, not the bundle).
 */
const publisherFactories = {
  ...defaultPublisherFactories,
  rabbitmq: rabbitmqPublisherFactory,
  kafka: kafkaPublisherFactory,
  nats: natsPublisherFactory,
  ...awsPublisherFactories,
};

/**
 * outbox-tick (EventBridge schedule, wake-ups and deferred ticks): reclaims expired leases, then claims, delivers
 * and settles batches until no row is claimable or the invocation's remaining time minus the safety margin is
 * spent; then books one deferred tick of itself at the earliest time a row scheduled later becomes due.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options, { services: { publisherFactories } });
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const { config, services, store } = await shell.cache.get();
    const report = await services.poller.drain({ deadline: shell.deadline(context) });
    const deferred = await shell.bookDeferredTick(
      await store.admin.nextDue('outbox'),
      context,
      config.aws.functions.outboxTick.rateMinutes,
    );
    shell.metrics.addMetric(METRIC.sent, MetricUnit.Count, report.sent);
    shell.metrics.addMetric(METRIC.retried, MetricUnit.Count, report.retried + report.reclaimed.returned);
    shell.metrics.addMetric(METRIC.dead, MetricUnit.Count, report.dead + report.reclaimed.dead);
    shell.metrics.addMetric(METRIC.stale, MetricUnit.Count, report.stale);
    shell.logger.info('outbox drain', { trigger: triggerOf(event), ...report, deferred });
    return { ...report, deferred };
  });
}

export const handler = createHandler();
