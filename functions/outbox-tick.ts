import { awsPublisherFactories } from '@queuebox/aws';
import { METRICS } from '@queuebox/deploy-contract';
import { kafkaPublisherFactory } from '@queuebox/kafka';
import { natsPublisherFactory } from '@queuebox/nats';
import { defaultPublisherFactories, type SettledOutboxRow } from '@queuebox/outbox';
import { rabbitmqPublisherFactory } from '@queuebox/rabbitmq';
import type { Context } from 'aws-lambda';
import { addCounts, publishGaugesAfterWrite } from './lambda-shell/gauges.ts';
import {
  createShell,
  lambda,
  MetricUnit,
  type ShellOptions,
  type TickEvent,
  triggerOf,
} from './lambda-shell/lambda.ts';

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
 * spent; then books one deferred tick of itself at the earliest time a row scheduled later becomes due. When the
 * drain changed rows it publishes the outbox gauges (`DeadRows`, `OldestPendingAgeSeconds`); counters that are 0
 * are not emitted; one `DeliveryLatency` value (ms) per sent row.
 */
export function createHandler(options: ShellOptions = {}) {
  // The poller reports settled rows before the drain returns; their latencies are emitted after the gauges, whose
  // documents carry the Table dimension, so they land in the counters' document ({ service } only).
  const latencies: number[] = [];
  const onSettled = (rows: readonly SettledOutboxRow[]) => {
    for (const { row, outcome, settledAt } of rows) {
      // created_at is the database's clock, settledAt this container's: a skew must not go negative.
      if (outcome === 'sent') latencies.push(Math.max(0, settledAt - row.createdAt.getTime()));
    }
  };
  const shell = createShell(options, { services: { publisherFactories, onOutboxSettled: onSettled } });
  return lambda(shell, async (event: TickEvent, context: Context) => {
    latencies.length = 0;
    const { config, services, store } = await shell.cache.get();
    const report = await services.poller.drain({ deadline: shell.deadline(context) });
    const deferred = await shell.bookDeferredTick(
      await store.admin.nextDue('outbox'),
      context,
      config.aws.functions.outboxTick.rateMinutes,
    );
    const counts = {
      [METRICS.sent]: report.sent,
      [METRICS.retried]: report.retried + report.reclaimed.returned,
      [METRICS.dead]: report.dead + report.reclaimed.dead,
      [METRICS.stale]: report.stale,
    };
    // The gauges follow a drain that changed rows; an idle tick reads nothing more (and publishes nothing).
    const changed = Object.values(counts).some((n) => n > 0);
    const gauges = changed ? await publishGaugesAfterWrite(shell, store, ['outbox']) : {};
    addCounts(shell.metrics, counts);
    for (const latency of latencies.splice(0)) {
      shell.metrics.addMetric(METRICS.deliveryLatency, MetricUnit.Milliseconds, latency);
    }
    shell.logger.info('outbox drain', { trigger: triggerOf(event), ...report, deferred, gauges });
    return { ...report, deferred, gauges };
  });
}

export const handler = createHandler();
