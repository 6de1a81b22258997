import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
import { KEY_WAIT_WARNING } from '@queuebox/inbox';
import type { Context } from 'aws-lambda';
import { addCounts, sampleBacklog, tryPublishGauges } from './lambda-shell/gauges.ts';
import { createShell, lambda, type ShellOptions, type TickEvent, triggerOf } from './lambda-shell/lambda.ts';
import { drainCoveringWakeUps } from './lambda-shell/woken-drain.ts';

/**
 * relay-tick (EventBridge schedule, wake-ups and deferred ticks): publishes the age of the oldest due pending inbox
 * row and the dead rows (`OldestPendingAgeSeconds`, `DeadRows`, sampled before the drain, on every tick: a pull
 * worker's dead rows are seen there), reclaims expired relay claims, then
 * forwards pending rows of push sources into the outbox until none is left or the budget is spent (a tick a wake-up
 * started drains until at least 1 s after its start: `drainCoveringWakeUps`); wakes outbox-tick when it wrote rows,
 * or may have (stale rows, a drain that failed); books one deferred tick of itself in the next minute when the time
 * ran out, else when a push row is scheduled later.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeOutbox = shell.wakeUp(FUNCTION_ENV.outboxTickFunction);
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const startedAt = shell.clock.now();
    // Whether a drain's rows woke outbox-tick (a request within a second of the last one is covered, not sent).
    let wokeOutbox = false;
    const { config, services, store } = await shell.cache.get();
    // Before the drain: a backlog nobody drained (a lost wake-up, rows no claim takes) is seen while it waits.
    const before = await sampleBacklog(shell, store, 'inbox');
    let report: Awaited<ReturnType<typeof services.relay.drain>>;
    try {
      report = await drainCoveringWakeUps({
        event,
        startedAt,
        clock: shell.clock,
        deadline: shell.deadline(context),
        drain: () => services.relay.drain({ deadline: shell.deadline(context) }),
        // outbox-tick is woken as soon as a drain has written rows, not after the hold (an outside review: every
        // relayed webhook waited the hold's second). Not by `outboxIds`: a forward whose answer was lost (and that
        // the relay found committed) counts its rows, not their outbox ids, and those rows wait for outbox-tick as
        // much as any. Stale rows too: a forward whose answer was lost and whose rows the relay could not read back
        // before its deadline counts them stale, though they may be in the outbox (a stale row that another relay
        // forwarded only costs a wake that finds it delivered).
        afterDrain: async (drained) => {
          if (drained.forwarded + drained.stale > 0 && (await wakeOutbox.request())) wokeOutbox = true;
        },
      });
    } catch (error) {
      // A drain that failed may have forwarded rows whose answer it never got (a forward that committed, then
      // failed past the deadline, or in an outage that outlasted its try again): wake outbox-tick anyway, so they
      // do not wait for its safety tick. A wake that finds nothing costs one short invocation, on a failure only.
      // Waited for at most until a second before the invocation's end, so a slow Lambda API cannot turn the
      // drain's error into a timeout.
      const bound = Math.max(0, context.getRemainingTimeInMillis() - 1_000);
      await Promise.race([
        wakeOutbox.request(),
        new Promise((resolve) => setTimeout(resolve, bound).unref()),
      ]);
      throw error;
    }
    // Only the relay's push sources: rows of pull sources wait for their own workers, not for this function. A drain
    // its deadline stopped may have left due rows: the next minute's deferred tick goes on with them.
    const deferred = await shell.bookDeferredTick(
      report.stoppedFor === 'time'
        ? new Date(shell.clock.now())
        : await store.admin.nextDue('inbox', { sources: services.relay.sources }),
      context,
      config.aws.functions.relayTick.rateMinutes,
    );
    const counts = {
      [METRICS.forwarded]: report.forwarded,
      [METRICS.dead]: report.dead,
      [METRICS.stale]: report.stale,
    };
    // A forward changes both tables (inbox rows processed or dead, outbox rows pending).
    const changed = report.forwarded + report.dead > 0;
    const { gauges, failure } = changed
      ? await tryPublishGauges(shell, store, ['inbox', 'outbox'])
      : { gauges: {} };
    addCounts(shell.metrics, counts);
    const { outboxIds, ...rest } = report;
    const oldestPendingBeforeMs = before.oldestPendingAgeMs;
    // The longest wait of a forward for outbox key locks other transactions held, over the invocation's drains
    // (`addReports` keeps the longer of two drains' `keyWaitMs`).
    const keyWaitMs = report.keyWaitMs ?? 0;
    shell.logger.info('relay drain', {
      trigger: triggerOf(event),
      oldestPendingBeforeMs,
      ...rest,
      wokeOutbox,
      deferred,
      gauges,
    });
    // A forward held for a second or more by an application's open transaction: said once per invocation.
    if (keyWaitMs >= KEY_WAIT_WARNING.thresholdMs) {
      shell.logger.warn(KEY_WAIT_WARNING.message, { waitedMs: keyWaitMs, hint: KEY_WAIT_WARNING.hint });
    }
    // Forwarded and outbox-tick woken; the invocation still fails, so the errors alarm hears the gauges'.
    if (failure !== undefined) throw failure;
    if (before.failure !== undefined) throw before.failure;
    return { ...report, oldestPendingBeforeMs, wokeOutbox, deferred, gauges };
  });
}

export const handler = createHandler();
