import { awsPublisherFactories } from '@queuebox/aws';
import { relayRuns } from '@queuebox/config';
import { errorFields, isMissingInstallIdError } from '@queuebox/core';
import { DESTINATION_DIMENSION, METRICS } from '@queuebox/deploy-contract';
import { defaultPublisherFactories, type SettledOutboxRow } from '@queuebox/outbox';
import { type DestinationCounts, splitByDestination, tallyByDestination } from '@queuebox/use-cases';
import type { Context } from 'aws-lambda';
import { addCounts, sampleBacklog, tryPublishGauges } from './lambda-shell/gauges.ts';
import {
  createShell,
  lambda,
  MetricUnit,
  type ShellOptions,
  type TickEvent,
  triggerOf,
} from './lambda-shell/lambda.ts';
import { lazyPublisherFactories } from './lambda-shell/lazy-publishers.ts';
import { drainCoveringWakeUps } from './lambda-shell/woken-drain.ts';

/**
 * The broker publishers, whose packages (kafkajs, the NATS client, amqplib) are imported only when the configuration
 * has a destination of their type: the shell's `prepare` loads them before the services are built, so each factory
 * is then the package's own (see lazy-publishers.ts). Statically imported, they were evaluated at every cold start
 * (an outside audit: ≈ 80–120 ms of CPU more than the other functions).
 */
const brokerPublishers = lazyPublisherFactories({
  rabbitmq: async () => (await import('@queuebox/rabbitmq')).rabbitmqPublisherFactory,
  kafka: async () => (await import('@queuebox/kafka')).kafkaPublisherFactory,
  nats: async () => (await import('@queuebox/nats')).natsPublisherFactory,
});

/**
 * Every destination type has a publisher here: http, rabbitmq, kafka, nats, sqs, sns, eventbridge. The broker
 * packages are imported when a destination of their type is configured; the AWS SDK clients of the last three on first
 * publish only (and come from the Lambda runtime, not the bundle).
 */
const publisherFactories = {
  ...defaultPublisherFactories,
  ...brokerPublishers.factories,
  ...awsPublisherFactories,
};

/** How long outbox-tick waits for a migration in progress before it tries again (a deferred tick). */
const MIGRATION_WAIT_MS = 60_000;

/**
 * outbox-tick (EventBridge schedule, wake-ups and deferred ticks): publishes the age of the oldest due pending
 * outbox row and the dead rows (`OldestPendingAgeSeconds`, `DeadRows`, sampled before the drain, on every tick),
 * reclaims expired leases, then
 * claims, delivers and settles batches until no row is claimable or the invocation's remaining time minus the
 * safety margin is spent (a tick a wake-up started drains until at least 1 s after its start: `drainCoveringWakeUps`);
 * then books one deferred tick of itself: in the next minute when the time ran out, else at the earliest time a row
 * scheduled later becomes due. When the drain changed rows it publishes the outbox gauges again (`DeadRows`, `OldestPendingAgeSeconds`);
 * counters that are 0 are not emitted; one `DeliveryLatency` value (ms) per sent row. `Sent`, `Retried` and `Dead`
 * also come by destination, so an operator sees which one fails: one document per configured destination that
 * settled rows, with both dimension sets `{ service }` and `{ service, Destination }`, and the rest (rows no route
 * matched, expired claims the reclaim returned or sent dead) in the `{ service }` document. Each row is counted in
 * one document, so the `{ service }` series sum to the drain's totals as before.
 */
export function createHandler(options: ShellOptions = {}) {
  // The poller reports settled rows before the drain returns; their latencies are emitted after the gauges, whose
  // documents carry the Table dimension, so they land in the counters' document ({ service } only).
  const latencies: number[] = [];
  const byDestination = new Map<string, DestinationCounts>();
  const onSettled = (rows: readonly SettledOutboxRow[]) => {
    for (const { outcome, latencyMs } of rows) {
      if (outcome === 'sent') latencies.push(latencyMs);
    }
    tallyByDestination(byDestination, rows);
  };
  const shell = createShell(options, {
    services: { publisherFactories, onOutboxSettled: onSettled },
    prepare: (config) => brokerPublishers.prepare(config.destinations),
  });
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const startedAt = shell.clock.now();
    latencies.length = 0;
    byDestination.clear();
    const { config, services, store } = await shell.cache.get();
    // Before the drain: a backlog nobody drained (a lost wake-up, rows no claim takes) is seen while it waits.
    const before = await sampleBacklog(shell, store, 'outbox');
    // Without a relay (pull sources only, or the relay off) infra plans no relay-tick, and nothing else samples the
    // inbox on a schedule: its gauges waited for the daily maintenance run (an outside audit: a pull worker's dead
    // row and a row waiting 2 h reached the alarms about a day late). outbox-tick samples it then, as relay-tick would.
    const inboxBefore = relayRuns(config) ? undefined : await sampleBacklog(shell, store, 'inbox');
    let report: Awaited<ReturnType<typeof services.poller.drain>>;
    try {
      report = await drainCoveringWakeUps({
        event,
        startedAt,
        clock: shell.clock,
        deadline: shell.deadline(context),
        drain: () => services.poller.drain({ deadline: shell.deadline(context) }),
      });
    } catch (error) {
      if (!isMissingInstallIdError(error)) throw error;
      // A deploy that adds migration 0005 updates this function's code before the migrate function ran: a wake-up
      // in that window finds no install id, claims nothing, and would be lost (asynchronous invokes are not
      // retried). It tries again in a minute, as a deferred tick, instead of failing.
      shell.logger.warn('outbox schema not migrated yet (a deploy in progress?); trying again in a minute', {
        trigger: triggerOf(event),
        error: errorFields(error),
      });
      const deferred = await shell.bookDeferredTick(
        new Date(Date.now() + MIGRATION_WAIT_MS),
        context,
        config.aws.functions.outboxTick.rateMinutes,
      );
      return { waitingForMigration: true, deferred };
    }
    // A drain its deadline stopped may have left due rows: the next minute's deferred tick goes on with them (an
    // outside audit: only rows scheduled later were booked, so a backlog waited for the periodic safety tick).
    const deferred = await shell.bookDeferredTick(
      report.stoppedFor === 'time' ? new Date(shell.clock.now()) : await store.admin.nextDue('outbox'),
      context,
      config.aws.functions.outboxTick.rateMinutes,
    );
    const totals = {
      sent: report.sent,
      retried: report.retried + report.reclaimed.returned,
      dead: report.dead + report.reclaimed.dead,
    };
    // The gauges follow a drain that changed rows; an idle tick reads nothing more (and publishes nothing).
    const changed = totals.sent + totals.retried + totals.dead + report.stale > 0;
    const { gauges, failure } = changed ? await tryPublishGauges(shell, store, ['outbox']) : { gauges: {} };
    // One document per destination that moved (its Destination value is the document's own), published before
    // the rest is stored: `{ service, Destination }` and `{ service }` from the same values. Only configured names,
    // so the dimension's values stay a closed set; anything else stays in the rest.
    const { byDestination: shares, rest } = splitByDestination(totals, byDestination, config.destinations);
    for (const [destination, share] of shares) {
      shell.metrics.addDimension(DESTINATION_DIMENSION, destination);
      // An empty dimension set is the default dimensions alone: the totals' { service } series.
      shell.metrics.addDimensions({});
      addCounts(shell.metrics, {
        [METRICS.sent]: share.sent,
        [METRICS.retried]: share.retried,
        [METRICS.dead]: share.dead,
      });
      shell.metrics.publishStoredMetrics();
    }
    addCounts(shell.metrics, {
      [METRICS.sent]: rest.sent,
      [METRICS.retried]: rest.retried,
      [METRICS.dead]: rest.dead,
      [METRICS.stale]: report.stale,
    });
    for (const latency of latencies.splice(0)) {
      shell.metrics.addMetric(METRICS.deliveryLatency, MetricUnit.Milliseconds, latency);
    }
    const oldestPendingBeforeMs = before.oldestPendingAgeMs;
    shell.logger.info('outbox drain', {
      trigger: triggerOf(event),
      oldestPendingBeforeMs,
      ...(inboxBefore === undefined ? {} : { inboxOldestPendingBeforeMs: inboxBefore.oldestPendingAgeMs }),
      ...report,
      deferred,
      gauges,
    });
    // The drain's rows are settled and counted; the invocation still fails, so the errors alarm hears the gauges'.
    if (failure !== undefined) throw failure;
    if (before.failure !== undefined) throw before.failure;
    if (inboxBefore?.failure !== undefined) throw inboxBefore.failure;
    return {
      ...report,
      oldestPendingBeforeMs,
      ...(inboxBefore === undefined ? {} : { inboxOldestPendingBeforeMs: inboxBefore.oldestPendingAgeMs }),
      deferred,
      gauges,
    };
  });
}

export const handler = createHandler();
