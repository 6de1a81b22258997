import { type DrainLoop, errorFields, type LogFields, type Logger, startDrainLoop } from '@queuebox/core';
import type { RelayDrainReport } from '@queuebox/inbox';
import type { QueueBoxMetrics } from './metrics.ts';

/** Options of {@link startTableLoop}. */
export interface TableLoopOptions<R> {
  /** Which drain this is: names its log lines (`relay drain`, `outbox drain failed; …`) and its error counter. */
  readonly name: 'relay' | 'outbox';
  /**
   * One drain, finished by `deadline` (epoch milliseconds). The outbox's (`loopDrainOf`) returns as soon as it stops
   * claiming for time, while the requests it started still run: the next drain starts at once and claims beside
   * them, and its report counts what they settled meanwhile. Its other stops wait for every request in flight.
   */
  readonly drain: (deadline: number) => Promise<R>;
  /** Whether a report means "no work left" (pause) rather than "stopped for time" (drain again at once). */
  readonly isIdle: (report: R) => boolean;
  /** Whether a report means the drained service closed for good. Default never. */
  readonly isFinished?: (report: R) => boolean;
  /** Pause after an idle drain (`inbox.relay.pollIntervalMs`, `outbox.pollIntervalMs`). */
  readonly pollIntervalMs: number;
  /** Time budget of one drain. */
  readonly budgetMs: number;
  /** Stops the loop at shutdown. */
  readonly signal: AbortSignal;
  /** The component's logger (`component: relay` / `outbox`). */
  readonly log: Logger;
  readonly metrics: Pick<QueueBoxMetrics, 'recordDrainError'>;
  /** Told of every drain first (its metrics, the wake-up of the next table). */
  readonly onDrain: (report: R) => void;
  /**
   * Tells the drain in progress that rows were written, so it claims again at once (the outbox poller's `wake`).
   * Default none: a wake-up only starts the next drain as soon as the running one ends.
   */
  readonly wakeDrain?: () => void;
  /** The fields of the `<name> drain` line, or undefined for a drain that did nothing (no line). */
  readonly summary: (report: R) => LogFields | undefined;
  /**
   * Runs once the loop stopped, before `done` resolves; a report it returns is told like a drain's, a failure
   * counted and logged like one (the outbox's `loopDrainOf(…).finish`: settles and reports the requests a drain that
   * handed over left in flight). Default none.
   */
  readonly finish?: (deadline: number) => Promise<R | undefined>;
}

/**
 * One table's drain loop of the local runtime; the relay and the outbox loop are both built by it. Core's drain
 * loop underneath (pause when idle, at once when out of time, a growing pause after failures); every failure is
 * counted, and logged when the trouble starts and then every 20th, instead of one line per poll.
 */
export function startTableLoop<R>(options: TableLoopOptions<R>): DrainLoop {
  const { name, log, finish } = options;
  const onDrain = (report: R) => {
    options.onDrain(report);
    const fields = options.summary(report);
    if (fields !== undefined) log.info(`${name} drain`, fields);
  };
  const onError = (error: unknown, failures: number) => {
    options.metrics.recordDrainError(name);
    if (failures === 1 || failures % 20 === 0) {
      log.error(`${name} drain failed; retrying with back-off`, { failures, error: errorFields(error) });
    }
  };
  const loop = startDrainLoop<R>({
    drain: options.drain,
    isIdle: options.isIdle,
    ...(options.isFinished ? { isFinished: options.isFinished } : {}),
    pollIntervalMs: options.pollIntervalMs,
    budgetMs: options.budgetMs,
    signal: options.signal,
    onDrain,
    onError,
    onRecovered(failures) {
      log.info(`${name} drain recovered`, { failures });
    },
  });
  const done =
    finish === undefined
      ? loop.done
      : loop.done.then(async () => {
          try {
            const report = await finish(Date.now() + options.budgetMs);
            if (report !== undefined) onDrain(report);
          } catch (error) {
            onError(error, 1);
          }
        });
  const { wakeDrain } = options;
  return {
    wake() {
      wakeDrain?.();
      loop.wake();
    },
    done,
  };
}

/** Most outbox ids one `relay drain` line lists; the others are counted in `outboxIdsNotListed`. */
export const LISTED_OUTBOX_IDS = 20;

/**
 * The fields of a `relay drain` line, or undefined for a drain that did nothing (no line). The ids of the outbox rows
 * it wrote let one trace a message (the demo's line lists `["1"]`); under load one drain forwards thousands, so the
 * line lists the first {@link LISTED_OUTBOX_IDS} and counts the rest, and stays a few hundred bytes.
 */
export function relayDrainSummary(report: RelayDrainReport): LogFields | undefined {
  if (report.forwarded + report.dead + report.stale + report.reclaimed.returned === 0) return undefined;
  const notListed = report.outboxIds.length - LISTED_OUTBOX_IDS;
  return {
    forwarded: report.forwarded,
    dead: report.dead,
    stale: report.stale,
    reclaimed: report.reclaimed.returned,
    outboxIds: notListed > 0 ? report.outboxIds.slice(0, LISTED_OUTBOX_IDS) : report.outboxIds,
    ...(notListed > 0 ? { outboxIdsNotListed: notListed } : {}),
  };
}
