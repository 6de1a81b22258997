import { retentionPolicyOf, runRetention } from '@queuebox/admin';
import type { Table } from '@queuebox/core';
import type { Context } from 'aws-lambda';
import { publishGauges } from './lambda-shell/gauges.ts';
import { createShell, lambda, type ShellOptions, type TickEvent, triggerOf } from './lambda-shell/lambda.ts';

/**
 * maintenance-tick (EventBridge schedule, daily by default): deletes finished rows as `retention` says (bounded
 * batches, within the budget), then publishes the dead-row count and the age of the oldest due pending row of each
 * table as EMF gauges with dimensions `{ service, Table }` — the gauges' heartbeat; the functions that change the
 * tables publish them in between.
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
      // The daily heartbeat of the gauges: the functions that change the tables publish them in between.
      const gauges = await publishGauges(shell.metrics, store, [
        'outbox',
        'inbox',
      ] satisfies readonly Table[]);
      shell.logger.info('maintenance', { trigger: triggerOf(event), retention, ...gauges });
      return { retention, ...gauges };
    },
    // The gauges are published per table above; there is nothing left to flush.
    { metrics: false },
  );
}

export const handler = createHandler();
