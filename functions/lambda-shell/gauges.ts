import { errorFields, type Store, type Table } from '@queuebox/core';
import { METRICS, TABLE_DIMENSION } from '@queuebox/deploy-contract';
import { type Logger, type Metrics, MetricUnit } from './lambda.ts';

/**
 * Adds the counters that are not zero. A counter emitted as 0 on every idle tick is a billed custom metric
 * (CloudWatch charges per metric that receives data in a month) that says nothing; one that never moved is absent.
 */
export function addCounts(metrics: Metrics, counts: Readonly<Record<string, number>>): void {
  for (const [name, value] of Object.entries(counts)) {
    if (value > 0) metrics.addMetric(name, MetricUnit.Count, value);
  }
}

/** What `publishGauges` published, per table. */
export type GaugeReport = Partial<
  Record<Table, { readonly dead: number; readonly oldestPendingAgeMs: number | null }>
>;

/**
 * Reads the dead-row count and the age of the oldest due pending row of `tables` (`admin.deadRows` and
 * `admin.oldestPendingAgeMs`: two short statements per table over indexes of the dead and the pending rows; the
 * full `admin.stats()` counts every row, sent ones kept for retention included, and took seconds at millions) and
 * publishes them as EMF gauges `DeadRows` / `OldestPendingAgeSeconds` with dimensions `{ service, Table }`, one
 * document per table. Called by the functions that just changed those tables (a drain that settled rows, a relay
 * that forwarded, an admin requeue or purge) and by the daily maintenance tick, never by a timer of its own: a
 * timer would keep a pausable database awake (the ticks sample both before each drain, {@link sampleBacklog}). The
 * alarms keep their state between datapoints.
 */
export async function publishGauges(
  metrics: Metrics,
  store: Store,
  tables: readonly Table[],
): Promise<GaugeReport> {
  if (tables.length === 0) return {};
  const read = await Promise.all(
    tables.map(async (table) => ({
      table,
      dead: await store.admin.deadRows(table),
      oldestPendingAgeMs: await store.admin.oldestPendingAgeMs(table),
    })),
  );
  const report: GaugeReport = {};
  for (const { table, dead, oldestPendingAgeMs } of read) {
    metrics.addDimension(TABLE_DIMENSION, table);
    metrics.addMetric(METRICS.deadRows, MetricUnit.Count, dead);
    metrics.addMetric(
      METRICS.oldestPendingAge,
      MetricUnit.Seconds,
      Math.floor((oldestPendingAgeMs ?? 0) / 1000),
    );
    metrics.publishStoredMetrics();
    report[table] = { dead, oldestPendingAgeMs };
  }
  return report;
}

/** What {@link sampleBacklog} read, or why it could not. */
export interface PendingSample {
  /** The age read (ms, database clock; `null`: no due pending row); absent when the read failed. */
  readonly oldestPendingAgeMs?: number | null;
  /** The dead rows counted; absent when the read failed. */
  readonly dead?: number;
  readonly failure?: unknown;
}

/**
 * Reads the age of the oldest due pending row of `table` and its dead rows (`admin.oldestPendingAgeMs` and
 * `admin.deadRows`: two short statements over the indexes of the pending and the dead rows) and publishes them at
 * once as the gauges `OldestPendingAgeSeconds` (0 when none is due) and `DeadRows`, dimensions `{ service, Table }`.
 * outbox-tick (outbox) and relay-tick (inbox) call it at the start of every tick, before the drain and whether or
 * not the drain then finds anything: a backlog nobody drains (a lost wake-up, rows no claim takes, a drain that
 * fails) is seen at the next tick that runs, while the rows are still waiting; and so are rows that went dead where
 * no function saw it, such as a pull worker's `markDead` in the application's own process (before, the inbox's
 * DeadRows waited for the daily maintenance tick or for push traffic). The gauges published after a drain that
 * changed rows come in the same 5-minute period, so the alarm's Maximum is the larger of the two. The ticks run
 * anyway and already query the database: the sample adds two statements, no wake-up and no new metric. A failure is
 * logged as a WARN and answered, never thrown: the drain still runs, and the tick rethrows it afterwards.
 */
export async function sampleBacklog(
  shell: { readonly metrics: Metrics; readonly logger: Logger },
  store: Store,
  table: Table,
): Promise<PendingSample> {
  try {
    const oldestPendingAgeMs = await store.admin.oldestPendingAgeMs(table);
    const dead = await store.admin.deadRows(table);
    shell.metrics.addDimension(TABLE_DIMENSION, table);
    shell.metrics.addMetric(
      METRICS.oldestPendingAge,
      MetricUnit.Seconds,
      Math.floor((oldestPendingAgeMs ?? 0) / 1000),
    );
    shell.metrics.addMetric(METRICS.deadRows, MetricUnit.Count, dead);
    shell.metrics.publishStoredMetrics();
    return { oldestPendingAgeMs, dead };
  } catch (error) {
    shell.logger.warn('sampling the oldest pending age and the dead rows failed; draining anyway', {
      table,
      error: errorFields(error),
    });
    return { failure: error };
  }
}

/**
 * `publishGauges` after a write that has already committed (rows stored, settled, forwarded, requeued, migrated):
 * a failure to read or publish the gauges is logged as a WARN and answered as `failure` with no gauges, never
 * thrown here. Thrown at once it would hand back a batch already stored (a broker or SQS source: redelivered,
 * counted again as duplicates) or skip what the invocation still has to do (relay-tick's wake-up of outbox-tick).
 * The ticks rethrow it once they are done, so their errors alarm hears it: the DeadRows alarm keeps its last state
 * until the next gauges (`treatMissingData: ignore`), and the daily maintenance tick's are the heartbeat.
 */
export async function tryPublishGauges(
  shell: { readonly metrics: Metrics; readonly logger: Logger },
  store: Store,
  tables: readonly Table[],
): Promise<{ readonly gauges: GaugeReport; readonly failure?: unknown }> {
  try {
    return { gauges: await publishGauges(shell.metrics, store, tables) };
  } catch (error) {
    shell.logger.warn('publishing the gauges failed; the rows written stay written', {
      tables: [...tables],
      error: errorFields(error),
    });
    return { gauges: {}, failure: error };
  }
}

/** {@link tryPublishGauges} for a caller that only logs the failure (the sources, migrate). */
export async function publishGaugesAfterWrite(
  shell: { readonly metrics: Metrics; readonly logger: Logger },
  store: Store,
  tables: readonly Table[],
): Promise<GaugeReport> {
  return (await tryPublishGauges(shell, store, tables)).gauges;
}
