import type { Store, Table } from '@queuebox/core';
import { METRICS, TABLE_DIMENSION } from '@queuebox/deploy-contract';
import { type Metrics, MetricUnit } from './lambda.ts';

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
 * Reads the dead-row count and the age of the oldest due pending row of `tables` (one `admin.stats()`) and
 * publishes them as EMF gauges `DeadRows` / `OldestPendingAgeSeconds` with dimensions `{ service, Table }`, one
 * document per table. Called by the functions that just changed those tables (a drain that settled rows, a relay
 * that forwarded, an admin requeue or purge) and by the daily maintenance tick, never by a frequent timer: a timer
 * would keep a pausable database awake. The alarms keep their state between datapoints.
 */
export async function publishGauges(
  metrics: Metrics,
  store: Store,
  tables: readonly Table[],
): Promise<GaugeReport> {
  if (tables.length === 0) return {};
  const stats = await store.admin.stats();
  const report: GaugeReport = {};
  for (const table of tables) {
    const { counts, oldestPendingAgeMs } = stats[table];
    metrics.addDimension(TABLE_DIMENSION, table);
    metrics.addMetric(METRICS.deadRows, MetricUnit.Count, counts.Dead);
    metrics.addMetric(
      METRICS.oldestPendingAge,
      MetricUnit.Seconds,
      Math.floor((oldestPendingAgeMs ?? 0) / 1000),
    );
    metrics.publishStoredMetrics();
    report[table] = { dead: counts.Dead, oldestPendingAgeMs };
  }
  return report;
}
