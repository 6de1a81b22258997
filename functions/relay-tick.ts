import type { Context } from 'aws-lambda';
import {
  createShell,
  ENV,
  lambda,
  METRIC,
  MetricUnit,
  type ShellOptions,
  type TickEvent,
  triggerOf,
} from './shell/lambda.ts';

/**
 * relay-tick (EventBridge schedule and wake-ups): reclaims expired relay claims, then forwards pending rows of
 * push sources into the outbox until none is left or the budget is spent; wakes outbox-tick when it wrote rows.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeOutbox = shell.wakeUp(ENV.outboxTickFunction);
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const { services } = await shell.cache.get();
    const report = await services.relay.drain({ deadline: shell.deadline(context) });
    shell.metrics.addMetric(METRIC.forwarded, MetricUnit.Count, report.forwarded);
    shell.metrics.addMetric(METRIC.dead, MetricUnit.Count, report.dead);
    shell.metrics.addMetric(METRIC.stale, MetricUnit.Count, report.stale);
    const wokeOutbox = report.outboxIds.length > 0 && (await wakeOutbox.request());
    const { outboxIds, ...counts } = report;
    shell.logger.info('relay drain', { trigger: triggerOf(event), ...counts, wokeOutbox });
    return { ...report, wokeOutbox };
  });
}

export const handler = createHandler();
