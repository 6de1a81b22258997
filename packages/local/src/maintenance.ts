import { type RetentionConfig, retentionPolicyOf, runRetention } from '@queuebox/admin';
import type { AdminStore, Clock } from '@queuebox/core';
import { errorFields, sleepUnlessAborted } from '@queuebox/core';
import type { Logger } from './logger.ts';
import type { QueueBoxMetrics } from './metrics.ts';

/** Options of {@link startMaintenance}. */
export interface MaintenanceOptions {
  readonly admin: AdminStore;
  /** The configuration's `retention` section (hours; 0 keeps that kind of row). */
  readonly retention: RetentionConfig;
  readonly metrics: QueueBoxMetrics;
  readonly logger: Logger;
  /** Stops both timers; a retention run in progress stops before its next batch. */
  readonly signal: AbortSignal;
  /** How often the row gauges are refreshed from `admin.stats()`; 0 turns it off. Default 15000 ms. */
  readonly statsIntervalMs?: number;
  /** How often retention runs (the first run is at start); 0 turns it off. Default 300000 ms (5 minutes). */
  readonly retentionIntervalMs?: number;
  /** Longest time one retention run keeps deleting batches; the next run goes on. Default 20000 ms. */
  readonly retentionBudgetMs?: number;
}

/** The running maintenance timers. */
export interface Maintenance {
  /** Refreshes the gauges now (what the timer does). Never rejects. */
  refreshStats(): Promise<void>;
  /** Resolves once both loops stopped after the signal aborted. Never rejects. */
  readonly done: Promise<void>;
}

/**
 * The local runtime's share of what maintenance-tick does on AWS: refreshes the gauges (rows per state, dead
 * rows, oldest pending age) from `admin.stats()` every `statsIntervalMs` (15 s), and deletes finished rows as
 * `retention` says every `retentionIntervalMs` (5 min), each run bounded by `retentionBudgetMs` (20 s) and the
 * configured batch size. Failures are counted and logged (once when they start, then every 20th) and tried again
 * at the next interval.
 */
export function startMaintenance(options: MaintenanceOptions): Maintenance {
  const { admin, metrics, signal } = options;
  const log = options.logger.child({ component: 'maintenance' });
  const statsIntervalMs = options.statsIntervalMs ?? 15_000;
  const retentionIntervalMs = options.retentionIntervalMs ?? 300_000;
  const retentionBudgetMs = options.retentionBudgetMs ?? 20_000;
  const policy = retentionPolicyOf(options.retention);
  // Aborting ends a retention run before its next batch: the deadline is "now" once the runtime stops.
  const clock: Clock = { now: () => (signal.aborted ? Number.POSITIVE_INFINITY : Date.now()) };

  let statsFailures = 0;
  async function refreshStats(): Promise<void> {
    try {
      metrics.recordStats(await admin.stats());
      if (statsFailures > 0) log.info('stats refresh recovered', { failures: statsFailures });
      statsFailures = 0;
    } catch (error) {
      statsFailures += 1;
      metrics.recordMaintenanceError('stats');
      if (statsFailures === 1 || statsFailures % 20 === 0) {
        log.warn('stats refresh failed; the gauges keep their last values', {
          failures: statsFailures,
          error: errorFields(error),
        });
      }
    }
  }

  let retentionFailures = 0;
  async function retain(): Promise<void> {
    try {
      const report = await runRetention(admin, {
        ...policy,
        deadline: Date.now() + retentionBudgetMs,
        clock,
      });
      metrics.recordRetention(report);
      if (report.total > 0 || !report.complete) log.info('retention', { ...report });
      retentionFailures = 0;
    } catch (error) {
      retentionFailures += 1;
      metrics.recordMaintenanceError('retention');
      if (retentionFailures === 1 || retentionFailures % 20 === 0) {
        log.warn('retention failed; trying again at the next interval', {
          failures: retentionFailures,
          error: errorFields(error),
        });
      }
    }
  }

  async function every(intervalMs: number, task: () => Promise<void>): Promise<void> {
    if (intervalMs <= 0) return;
    while (!signal.aborted) {
      await task();
      await sleepUnlessAborted(intervalMs, signal);
    }
  }

  const retentionOn = policy.keepSentMs > 0 || policy.keepDeadMs > 0;
  if (retentionOn && retentionIntervalMs > 0) {
    log.info('retention scheduled', {
      keepSentHours: options.retention.keepSentHours,
      keepDeadHours: options.retention.keepDeadHours,
      batchSize: options.retention.batchSize,
      intervalMs: retentionIntervalMs,
    });
  }
  const done = Promise.all([
    every(statsIntervalMs, refreshStats),
    retentionOn ? every(retentionIntervalMs, retain) : undefined,
  ]).then(() => undefined);
  return { refreshStats, done };
}
