import { type RetentionConfig, type RetentionReport, retentionPolicyOf, runRetention } from '@queuebox/admin';
import type { AdminStore, Clock, Table } from '@queuebox/core';
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
  /** How often the row gauges are refreshed from `admin.gauges()`; 0 turns it off. Default 15000 ms. */
  readonly statsIntervalMs?: number;
  /** How often retention runs (the first run is at start); 0 turns it off. Default 300000 ms (5 minutes). */
  readonly retentionIntervalMs?: number;
  /** Longest time one retention run keeps deleting batches; the next run goes on. Default 20000 ms. */
  readonly retentionBudgetMs?: number;
  /**
   * Where the store vacuums on request (`admin.vacuum`: PGlite, which runs no autovacuum): least time between two
   * VACUUMs of the tables retention deleted from. Default 300000 ms (5 minutes).
   */
  readonly vacuumIntervalMs?: number;
}

/** The running maintenance timers. */
export interface Maintenance {
  /** Refreshes the gauges now (what the timer does). Never rejects. */
  refreshStats(): Promise<void>;
  /** Runs retention now (what the timer does), then the VACUUM that may follow it. Never rejects. */
  retain(): Promise<void>;
  /** Resolves once both loops stopped after the signal aborted. Never rejects. */
  readonly done: Promise<void>;
}

/**
 * The local runtime's share of what maintenance-tick does on AWS: refreshes the gauges (rows per state, dead
 * rows, oldest pending age) from `admin.gauges()` every `statsIntervalMs` (15 s; finished rows estimated, never
 * counted), and deletes finished rows as `retention` says every `retentionIntervalMs` (5 min), each run bounded by
 * `retentionBudgetMs` (20 s) and the configured batch size. On a store that vacuums on request (PGlite) a run that
 * deleted rows is followed by a plain VACUUM of the tables it deleted from, at most once per `vacuumIntervalMs`
 * (5 min). Failures are counted and logged (once when they start, then every 20th) and tried again at the next
 * interval.
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
      // Not `stats()`: it counts every finished row, a scan of the whole table at millions of them (an outside
      // audit: 4 s every 15 s at 15M sent rows); `gauges()` reads the partial indexes and estimates the rest.
      metrics.recordGauges(await admin.gauges());
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

  // PGlite vacuums nothing by itself: the tables retention deleted from are vacuumed after the run, at most once per
  // `vacuumIntervalMs`; a table whose VACUUM had to wait is remembered until it is done (an outside audit: the outbox
  // grew 24 -> 48 -> 72 MB over three purge cycles, and stayed at 28.6 MB with a VACUUM after each).
  const vacuumIntervalMs = options.vacuumIntervalMs ?? 300_000;
  const toVacuum = new Set<Table>();
  let lastVacuumAt = Number.NEGATIVE_INFINITY;
  let vacuumFailures = 0;
  async function vacuumAfterRetention(report: RetentionReport): Promise<void> {
    const vacuum = admin.vacuum?.bind(admin);
    if (vacuum === undefined) return;
    if (report.deleted.outbox.sent + report.deleted.outbox.dead > 0) toVacuum.add('outbox');
    if (report.deleted.inbox.processed + report.deleted.inbox.dead > 0) toVacuum.add('inbox');
    if (toVacuum.size === 0 || signal.aborted || Date.now() - lastVacuumAt < vacuumIntervalMs) return;
    const tables = [...toVacuum];
    const started = Date.now();
    try {
      await vacuum(tables);
      lastVacuumAt = Date.now();
      toVacuum.clear();
      log.info('vacuumed after retention', { tables, ms: lastVacuumAt - started });
      vacuumFailures = 0;
    } catch (error) {
      vacuumFailures += 1;
      metrics.recordMaintenanceError('retention');
      if (vacuumFailures === 1 || vacuumFailures % 20 === 0) {
        log.warn('VACUUM after retention failed; trying again after the next run', {
          tables,
          failures: vacuumFailures,
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
      await vacuumAfterRetention(report);
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
  return { refreshStats, retain, done };
}
