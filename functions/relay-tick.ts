import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
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
 * relay-tick (EventBridge schedule, wake-ups and deferred ticks): reclaims expired relay claims, then forwards
 * pending rows of push sources into the outbox until none is left or the budget is spent; wakes outbox-tick when
 * it wrote rows; books one deferred tick of itself when a push row is scheduled later.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeOutbox = shell.wakeUp(FUNCTION_ENV.outboxTickFunction);
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const { config, services, store } = await shell.cache.get();
    const report = await services.relay.drain({ deadline: shell.deadline(context) });
    // Only the relay's push sources: rows of pull sources wait for their own workers, not for this function.
    const deferred = await shell.bookDeferredTick(
      await store.admin.nextDue('inbox', { sources: services.relay.sources }),
      context,
      config.aws.functions.relayTick.rateMinutes,
    );
    shell.metrics.addMetric(METRICS.forwarded, MetricUnit.Count, report.forwarded);
    shell.metrics.addMetric(METRICS.dead, MetricUnit.Count, report.dead);
    shell.metrics.addMetric(METRICS.stale, MetricUnit.Count, report.stale);
    const wokeOutbox = report.outboxIds.length > 0 && (await wakeOutbox.request());
    const { outboxIds, ...counts } = report;
    shell.logger.info('relay drain', { trigger: triggerOf(event), ...counts, wokeOutbox, deferred });
    return { ...report, wokeOutbox, deferred };
  });
}

export const handler = createHandler();
