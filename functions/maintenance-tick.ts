import { type RetentionReport, retentionPolicyOf, runRetention } from '@queuebox/admin';
import { MessageState, type Table } from '@queuebox/core';
import type { BookingOutcome } from '@queuebox/wake-ups';
import type { Context } from 'aws-lambda';
import { publishGauges } from './lambda-shell/gauges.ts';
import { createShell, lambda, type ShellOptions, type TickEvent, triggerOf } from './lambda-shell/lambda.ts';

/**
 * maintenance-tick (EventBridge schedule, daily by default, and its own deferred ticks): deletes finished rows as
 * `retention` says (bounded batches, within the budget), then publishes the dead-row count and the age of the oldest
 * due pending row of each table as EMF gauges with dimensions `{ service, Table }` — the gauges' heartbeat; the
 * functions that change the tables publish them in between.
 *
 * A run that deleted rows and still ran out of time (`complete: false`) logs a WARN naming what is left and books
 * one deferred tick of itself in the next minute, as outbox-tick does for a drain its deadline stopped, so a backlog
 * larger than one run deletes (15M sent rows: about 2.2M per 30 s) is worked off run after run instead of once a
 * day while the table grows. The chain ends with the first run that completes; a run that deleted nothing (no time
 * left for a batch, every row held by another purge) books nothing, so a tick that cannot make progress does not
 * invoke itself every minute. The booking is the shell's: one schedule per function and minute, none when the
 * periodic tick fires that minute anyway, none without `WAKE_SCHEDULE_GROUP` / `WAKE_SCHEDULER_ROLE_ARN`.
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
      const followUp = await bookFollowUp(
        retention,
        context,
        config.aws.functions.maintenanceTick.rateMinutes,
      );
      // The daily heartbeat of the gauges: the functions that change the tables publish them in between.
      const gauges = await publishGauges(shell.metrics, store, [
        'outbox',
        'inbox',
      ] satisfies readonly Table[]);
      shell.logger.info('maintenance', {
        trigger: triggerOf(event),
        retention,
        ...(followUp === undefined ? {} : { followUp }),
        ...gauges,
      });
      return { retention, ...(followUp === undefined ? {} : { followUp }), ...gauges };
    },
    // The gauges are published per table above; there is nothing left to flush.
    { metrics: false },
  );

  /** After an incomplete run: the WARN, and the next minute's run when this one made progress. */
  async function bookFollowUp(
    retention: RetentionReport,
    context: Context,
    rateMinutes: number,
  ): Promise<BookingOutcome | undefined> {
    if (retention.complete) return undefined;
    const left = retention.unfinished.map(({ table, state }) => `${table} ${stateWord(table, state)}`);
    if (retention.total === 0) {
      shell.logger.warn('retention incomplete and nothing deleted; no follow-up run booked', {
        left,
        batches: retention.batches,
      });
      return undefined;
    }
    const booked = await shell.bookDeferredTick(new Date(shell.clock.now()), context, rateMinutes);
    shell.logger.warn('retention incomplete: old rows are left; the next run goes on with them', {
      left,
      deleted: retention.deleted,
      total: retention.total,
      followUp: booked.booked ? booked.at : `not booked (${booked.reason}); the next scheduled run goes on`,
    });
    return booked;
  }
}

/** The state's word as the tables store it: the inbox's finished rows are `processed`. */
function stateWord(table: Table, state: RetentionReport['unfinished'][number]['state']): string {
  if (state === MessageState.Dead) return 'dead';
  return table === 'inbox' ? 'processed' : 'sent';
}

export const handler = createHandler();
