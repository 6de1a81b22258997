import { awsPublisherFactories } from '@queuebox/aws';
import { METRICS } from '@queuebox/deploy-contract';
import { kafkaPublisherFactory } from '@queuebox/kafka';
import { natsPublisherFactory } from '@queuebox/nats';
import { defaultPublisherFactories, type SettledOutboxRow } from '@queuebox/outbox';
import { rabbitmqPublisherFactory } from '@queuebox/rabbitmq';
import type { Context } from 'aws-lambda';
import {
  createShell,
  lambda,
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
 * spent; then books one deferred tick of itself at the earliest time a row scheduled later becomes due. Emits the
 * counters Sent, Retried, Dead, Stale and one DeliveryLatency value per sent row.
 */
export function createHandler(options: ShellOptions = {}) {
  // The poller reports settled rows before the drain returns; the latencies join this invocation's EMF document.
  let onSettled: (rows: readonly SettledOutboxRow[]) => void = () => {};
  const shell = createShell(options, {
    services: { publisherFactories, onOutboxSettled: (rows) => onSettled(rows) },
  });
  onSettled = (rows) => {
    for (const { row, outcome, settledAt } of rows) {
      if (outcome !== 'sent') continue;
      // created_at is the database's clock, settledAt this container's: a skew must not go negative.
      const latency = Math.max(0, settledAt - row.createdAt.getTime());
      shell.metrics.addMetric(METRICS.deliveryLatency, MetricUnit.Milliseconds, latency);
    }
  };
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const { config, services, store } = await shell.cache.get();
    const report = await services.poller.drain({ deadline: shell.deadline(context) });
    const deferred = await shell.bookDeferredTick(
      await store.admin.nextDue('outbox'),
      context,
      config.aws.functions.outboxTick.rateMinutes,
    );
    shell.metrics.addMetric(METRICS.sent, MetricUnit.Count, report.sent);
    shell.metrics.addMetric(METRICS.retried, MetricUnit.Count, report.retried + report.reclaimed.returned);
    shell.metrics.addMetric(METRICS.dead, MetricUnit.Count, report.dead + report.reclaimed.dead);
    shell.metrics.addMetric(METRICS.stale, MetricUnit.Count, report.stale);
    shell.logger.info('outbox drain', { trigger: triggerOf(event), ...report, deferred });
    return { ...report, deferred };
  });
}

export const handler = createHandler();
