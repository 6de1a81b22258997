import type { IngestResponse, DrainReport as RelayDrainReport } from '@queuebox/inbox';
import type { DrainReport as OutboxDrainReport } from '@queuebox/outbox';

/** Label names and values of one series. */
export type Labels = Readonly<Record<string, string>>;

/** A monotonically increasing count, by label set. */
export interface Counter {
  inc(labels?: Labels, by?: number): void;
  /** The current value of one series (0 when never increased). */
  value(labels?: Labels): number;
}

/** A registry of counters rendered in the Prometheus text exposition format (version 0.0.4). */
export interface MetricsRegistry {
  /** Registers (or returns the already registered) counter `name`; `name` should end in `_total`. */
  counter(name: string, help: string): Counter;
  /** Every counter, in registration order, as Prometheus text. */
  render(): string;
}

/** The content type of {@link MetricsRegistry.render}'s text. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

// Sorted label names make one key per label set whatever order the caller wrote them in.
function seriesKey(labels: Labels): string {
  const names = Object.keys(labels).sort();
  for (const name of names) {
    if (!LABEL_NAME.test(name)) throw new Error(`Invalid metric label name ${JSON.stringify(name)}`);
  }
  return names.map((name) => `${name}="${escapeLabelValue(labels[name] ?? '')}"`).join(',');
}

/** Creates an empty registry. Counters only: the local runtime needs nothing more, and no dependency. */
export function createMetricsRegistry(): MetricsRegistry {
  const counters = new Map<string, { help: string; series: Map<string, number> }>();
  return {
    counter(name, help) {
      if (!METRIC_NAME.test(name)) throw new Error(`Invalid metric name ${JSON.stringify(name)}`);
      let entry = counters.get(name);
      if (entry === undefined) {
        entry = { help, series: new Map() };
        counters.set(name, entry);
      }
      const { series } = entry;
      return {
        inc(labels = {}, by = 1) {
          if (!(by >= 0)) throw new Error(`A counter only goes up; got ${by}`);
          const key = seriesKey(labels);
          series.set(key, (series.get(key) ?? 0) + by);
        },
        value(labels = {}) {
          return series.get(seriesKey(labels)) ?? 0;
        },
      };
    },
    render() {
      const lines: string[] = [];
      for (const [name, { help, series }] of counters) {
        lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} counter`);
        // A counter without any series yet still shows 0, so dashboards see it from the start.
        if (series.size === 0) lines.push(`${name} 0`);
        for (const [key, value] of series) lines.push(`${name}${key === '' ? '' : `{${key}}`} ${value}`);
      }
      return `${lines.join('\n')}\n`;
    },
  };
}

/** The counters of the local runtime, fed from ingestion answers and drain reports. */
export interface QueueBoxMetrics {
  readonly registry: MetricsRegistry;
  /** Counts one answered inbox request by its outcome. */
  recordIngestion(response: Pick<IngestResponse, 'outcome' | 'source'>): void;
  recordRelayDrain(report: RelayDrainReport): void;
  recordOutboxDrain(report: OutboxDrainReport): void;
  /** Counts a drain that threw (the loop tries again after the poll interval). */
  recordDrainError(loop: 'relay' | 'outbox'): void;
}

/**
 * Creates the QueueBox counters (in `options.registry`, default a new one; `options.sources` are the HTTP sources
 * whose series start at 0):
 * `queuebox_inbox_accepted_total{source}`, `queuebox_inbox_duplicate_total{source}`,
 * `queuebox_inbox_rejected_total{source,reason}` (reason = the ingestion outcome, e.g. `unauthorized`),
 * `queuebox_relay_forwarded_total`, `queuebox_outbox_sent_total`, `queuebox_outbox_retried_total`,
 * `queuebox_dead_total{table}`, `queuebox_outbox_released_total`, `queuebox_reclaimed_total{table}`,
 * `queuebox_stale_claims_total{table}` and `queuebox_drain_errors_total{loop}`.
 */
export function createQueueBoxMetrics(
  options: { readonly registry?: MetricsRegistry; readonly sources?: readonly string[] } = {},
): QueueBoxMetrics {
  const registry = options.registry ?? createMetricsRegistry();
  const accepted = registry.counter('queuebox_inbox_accepted_total', 'Inbox messages stored (HTTP 202).');
  const duplicate = registry.counter(
    'queuebox_inbox_duplicate_total',
    'Inbox messages already stored for their source and idempotency key (HTTP 200 duplicate).',
  );
  const rejected = registry.counter(
    'queuebox_inbox_rejected_total',
    'Inbox requests not stored, by reason (unauthorized, invalid_message, payload_too_large, ...).',
  );
  const forwarded = registry.counter(
    'queuebox_relay_forwarded_total',
    'Inbox rows the relay forwarded into the outbox.',
  );
  const sent = registry.counter('queuebox_outbox_sent_total', 'Outbox rows a destination accepted.');
  const retried = registry.counter(
    'queuebox_outbox_retried_total',
    'Outbox deliveries that failed and were scheduled again.',
  );
  const dead = registry.counter('queuebox_dead_total', 'Rows that went dead, by table.');
  const released = registry.counter(
    'queuebox_outbox_released_total',
    'Claimed outbox rows given back untried (ordering hold-back, deadline, shutdown).',
  );
  const reclaimed = registry.counter(
    'queuebox_reclaimed_total',
    'Expired claims returned to pending, by table.',
  );
  const stale = registry.counter(
    'queuebox_stale_claims_total',
    'Settles refused because the claim had been lost, by table.',
  );
  const drainErrors = registry.counter(
    'queuebox_drain_errors_total',
    'Drains that failed (e.g. database unavailable), by loop.',
  );

  // Series that exist from the start read 0 instead of being absent, so rates and alerts work at once.
  for (const source of options.sources ?? []) {
    accepted.inc({ source }, 0);
    duplicate.inc({ source }, 0);
  }
  for (const table of ['inbox', 'outbox']) {
    dead.inc({ table }, 0);
    reclaimed.inc({ table }, 0);
    stale.inc({ table }, 0);
  }
  for (const loop of ['relay', 'outbox']) drainErrors.inc({ loop }, 0);

  return {
    registry,
    recordIngestion({ outcome, source }) {
      const labels = { source: source ?? '' };
      if (outcome === 'accepted') accepted.inc(labels);
      else if (outcome === 'duplicate') duplicate.inc(labels);
      else rejected.inc({ ...labels, reason: outcome });
    },
    recordRelayDrain(report) {
      if (report.forwarded > 0) forwarded.inc({}, report.forwarded);
      if (report.dead > 0) dead.inc({ table: 'inbox' }, report.dead);
      if (report.reclaimed.returned > 0) reclaimed.inc({ table: 'inbox' }, report.reclaimed.returned);
      if (report.reclaimed.dead > 0) dead.inc({ table: 'inbox' }, report.reclaimed.dead);
      if (report.stale > 0) stale.inc({ table: 'inbox' }, report.stale);
    },
    recordOutboxDrain(report) {
      if (report.sent > 0) sent.inc({}, report.sent);
      if (report.retried > 0) retried.inc({}, report.retried);
      if (report.dead > 0) dead.inc({ table: 'outbox' }, report.dead);
      if (report.released > 0) released.inc({}, report.released);
      if (report.reclaimed.returned > 0) reclaimed.inc({ table: 'outbox' }, report.reclaimed.returned);
      if (report.reclaimed.dead > 0) dead.inc({ table: 'outbox' }, report.reclaimed.dead);
      if (report.stale > 0) stale.inc({ table: 'outbox' }, report.stale);
    },
    recordDrainError(loop) {
      drainErrors.inc({ loop });
    },
  };
}
