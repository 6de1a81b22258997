import { retentionPolicyOf, runRetention } from '@queuebox/admin';
import type { Table } from '@queuebox/core';
import type { Context } from 'aws-lambda';
import {
  createShell,
  lambda,
  MetricUnit,
  type ShellOptions,
  type TickEvent,
  triggerOf,
} from './shell/lambda.ts';

/** The gauges the alarms read (infra/contract.ts METRICS), per table, dimension `Table`. */
export const GAUGE = { deadRows: 'DeadRows', oldestPendingAge: 'OldestPendingAgeSeconds' } as const;

/**
 * maintenance-tick (EventBridge schedule): deletes finished rows as `retention` says (bounded batches, within the
 * budget), then publishes the dead-row count and the age of the oldest due pending row of each table as EMF
 * gauges with dimensions `{ service, Table }`.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  return lambda(
    shell,
    async (event: TickEvent, context: Context) => {
      const { config, store } = await shell.cache.get();
      const retention = await runRetention(store.admin, {
        ...retentionPolicyOf(config.retention),
        deadline: shell.deadline(context),
        clock: shell.clock,
      });
      const stats = await store.admin.stats();
      for (const table of ['outbox', 'inbox'] as const satisfies readonly Table[]) {
        // One EMF document per table: both gauges with dimensions { service, Table }.
        shell.metrics.addDimension('Table', table);
        shell.metrics.addMetric(GAUGE.deadRows, MetricUnit.Count, stats[table].counts.Dead);
        shell.metrics.addMetric(
          GAUGE.oldestPendingAge,
          MetricUnit.Seconds,
          Math.floor((stats[table].oldestPendingAgeMs ?? 0) / 1000),
        );
        shell.metrics.publishStoredMetrics();
      }
      const gauges = {
        outbox: { counts: stats.outbox.counts, oldestPendingAgeMs: stats.outbox.oldestPendingAgeMs },
        inbox: { counts: stats.inbox.counts, oldestPendingAgeMs: stats.inbox.oldestPendingAgeMs },
      };
      shell.logger.info('maintenance', { trigger: triggerOf(event), retention, ...gauges });
      return { retention, ...gauges };
    },
    // The gauges are published per table above; there is nothing left to flush.
    { metrics: false },
  );
}

export const handler = createHandler();
