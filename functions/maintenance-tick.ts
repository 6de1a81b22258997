import { retentionPolicyOf, runRetention } from '@queuebox/admin';
import type { Table } from '@queuebox/core';
import { METRICS, TABLE_DIMENSION, TABLES } from '@queuebox/deploy-contract';
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
      for (const table of TABLES satisfies readonly Table[]) {
        // One EMF document per table: both gauges with dimensions { service, Table }.
        shell.metrics.addDimension(TABLE_DIMENSION, table);
        shell.metrics.addMetric(METRICS.deadRows, MetricUnit.Count, stats[table].counts.Dead);
        shell.metrics.addMetric(
          METRICS.oldestPendingAge,
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
