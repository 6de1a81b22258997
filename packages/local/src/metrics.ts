import type { RetentionReport } from '@queuebox/admin';
import type { AdminStats, BrokerIngestResult, MessageState, Table } from '@queuebox/core';
import type { IngestResponse, DrainReport as RelayDrainReport } from '@queuebox/inbox';
import type { DrainReport as OutboxDrainReport, SettledOutboxRow } from '@queuebox/outbox';

/** Label names and values of one series. */
export type Labels = Readonly<Record<string, string>>;

/** A monotonically increasing count, by label set. */
export interface Counter {
  inc(labels?: Labels, by?: number): void;
  /** The current value of one series (0 when never increased). */
  value(labels?: Labels): number;
}

/** A value that goes up and down (a row count, an age), by label set. */
export interface Gauge {
  set(labels: Labels, value: number): void;
  /** The current value of one series, or undefined when never set. */
  value(labels?: Labels): number | undefined;
}

/** Observations counted into cumulative buckets, with their sum and count, by label set. */
export interface Histogram {
  observe(labels: Labels, value: number): void;
  /** Observations of one series so far. */
  count(labels?: Labels): number;
  /** Sum of the observations of one series so far. */
  sum(labels?: Labels): number;
  /** Creates the series of `labels` with every bucket at 0, so it shows before the first observation. */
  touch(labels: Labels): void;
}

/**
 * A registry of counters, gauges and histograms rendered in the Prometheus text exposition format (version
 * 0.0.4). Registering a name again returns the metric already registered under it (of the same kind).
 */
export interface MetricsRegistry {
  /** Registers counter `name`; `name` should end in `_total`. */
  counter(name: string, help: string): Counter;
  /** Registers gauge `name`. */
  gauge(name: string, help: string): Gauge;
  /**
   * Registers histogram `name` with the given upper bucket bounds (sorted ascending; `+Inf` is added). Default
   * {@link DEFAULT_LATENCY_BUCKETS_SECONDS}. `name` should end in the unit, e.g. `_seconds`.
   */
  histogram(name: string, help: string, buckets?: readonly number[]): Histogram;
  /** Every metric, in registration order, as Prometheus text. */
  render(): string;
}

/** The content type of {@link MetricsRegistry.render}'s text. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * Default histogram buckets, in seconds: from 5 ms (a wake-up on a quiet database) to an hour (a row that waited
 * out retries with back-off).
 */
export const DEFAULT_LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
];

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function formatValue(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

// Sorted label names make one key per label set whatever order the caller wrote them in.
function seriesKey(labels: Labels): string {
  const names = Object.keys(labels).sort();
  for (const name of names) {
    if (!LABEL_NAME.test(name)) throw new Error(`Invalid metric label name ${JSON.stringify(name)}`);
  }
  return names.map((name) => `${name}="${escapeLabelValue(labels[name] ?? '')}"`).join(',');
}

const braces = (key: string) => (key === '' ? '' : `{${key}}`);
const withLe = (key: string, le: string) => `{${key === '' ? '' : `${key},`}le="${le}"}`;

interface HistogramSeries {
  readonly buckets: number[];
  count: number;
  sum: number;
}

type Entry =
  | {
      readonly kind: 'counter';
      readonly help: string;
      readonly series: Map<string, number>;
      readonly api: Counter;
    }
  | {
      readonly kind: 'gauge';
      readonly help: string;
      readonly series: Map<string, number>;
      readonly api: Gauge;
    }
  | {
      readonly kind: 'histogram';
      readonly help: string;
      readonly bounds: readonly number[];
      readonly series: Map<string, HistogramSeries>;
      readonly api: Histogram;
    };

/** Creates an empty registry. Hand-written: the local runtime needs three metric kinds and no dependency. */
export function createMetricsRegistry(): MetricsRegistry {
  const entries = new Map<string, Entry>();

  function existing<K extends Entry['kind']>(name: string, kind: K): Extract<Entry, { kind: K }> | undefined {
    if (!METRIC_NAME.test(name)) throw new Error(`Invalid metric name ${JSON.stringify(name)}`);
    const entry = entries.get(name);
    if (entry === undefined) return undefined;
    if (entry.kind !== kind) throw new Error(`Metric ${name} is already registered as a ${entry.kind}`);
    return entry as Extract<Entry, { kind: K }>;
  }

  return {
    counter(name, help) {
      const known = existing(name, 'counter');
      if (known) return known.api;
      const series = new Map<string, number>();
      const api: Counter = {
        inc(labels = {}, by = 1) {
          if (!(by >= 0)) throw new Error(`A counter only goes up; got ${by}`);
          const key = seriesKey(labels);
          series.set(key, (series.get(key) ?? 0) + by);
        },
        value(labels = {}) {
          return series.get(seriesKey(labels)) ?? 0;
        },
      };
      entries.set(name, { kind: 'counter', help, series, api });
      return api;
    },
    gauge(name, help) {
      const known = existing(name, 'gauge');
      if (known) return known.api;
      const series = new Map<string, number>();
      const api: Gauge = {
        set(labels, value) {
          if (Number.isNaN(value)) throw new Error('A gauge value must be a number');
          series.set(seriesKey(labels), value);
        },
        value(labels = {}) {
          return series.get(seriesKey(labels));
        },
      };
      entries.set(name, { kind: 'gauge', help, series, api });
      return api;
    },
    histogram(name, help, buckets = DEFAULT_LATENCY_BUCKETS_SECONDS) {
      const known = existing(name, 'histogram');
      if (known) return known.api;
      const bounds = [...buckets];
      if (
        bounds.length === 0 ||
        bounds.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= (bounds[i - 1] ?? b)))
      ) {
        throw new Error(`Histogram ${name}: buckets must be finite and strictly ascending`);
      }
      const series = new Map<string, HistogramSeries>();
      const seriesOf = (labels: Labels) => {
        if ('le' in labels) throw new Error('A histogram label cannot be named "le"');
        const key = seriesKey(labels);
        let found = series.get(key);
        if (found === undefined) {
          found = { buckets: bounds.map(() => 0), count: 0, sum: 0 };
          series.set(key, found);
        }
        return found;
      };
      const api: Histogram = {
        observe(labels, value) {
          if (Number.isNaN(value)) throw new Error('A histogram observation must be a number');
          const s = seriesOf(labels);
          // Stored per bucket, not cumulative; render() adds them up.
          const index = bounds.findIndex((bound) => value <= bound);
          if (index >= 0) s.buckets[index] = (s.buckets[index] ?? 0) + 1;
          s.count += 1;
          s.sum += value;
        },
        count(labels = {}) {
          return series.get(seriesKey(labels))?.count ?? 0;
        },
        sum(labels = {}) {
          return series.get(seriesKey(labels))?.sum ?? 0;
        },
        touch(labels) {
          seriesOf(labels);
        },
      };
      entries.set(name, { kind: 'histogram', help, bounds, series, api });
      return api;
    },
    render() {
      const lines: string[] = [];
      for (const [name, entry] of entries) {
        lines.push(`# HELP ${name} ${escapeHelp(entry.help)}`, `# TYPE ${name} ${entry.kind}`);
        if (entry.kind === 'histogram') {
          for (const [key, s] of entry.series) {
            let cumulative = 0;
            entry.bounds.forEach((bound, i) => {
              cumulative += s.buckets[i] ?? 0;
              lines.push(`${name}_bucket${withLe(key, formatValue(bound))} ${cumulative}`);
            });
            lines.push(`${name}_bucket${withLe(key, '+Inf')} ${s.count}`);
            lines.push(`${name}_sum${braces(key)} ${formatValue(s.sum)}`);
            lines.push(`${name}_count${braces(key)} ${s.count}`);
          }
          continue;
        }
        // A counter without any series yet still shows 0, so dashboards see it from the start. A gauge without
        // one has no value yet (its first refresh has not run), so it shows none.
        if (entry.kind === 'counter' && entry.series.size === 0) lines.push(`${name} 0`);
        for (const [key, value] of entry.series) lines.push(`${name}${braces(key)} ${formatValue(value)}`);
      }
      return `${lines.join('\n')}\n`;
    },
  };
}

/** The metrics of the local runtime, fed from ingestion answers, drain reports, settles and stats. */
export interface QueueBoxMetrics {
  readonly registry: MetricsRegistry;
  /** Counts one answered inbox request by its outcome. */
  recordIngestion(response: Pick<IngestResponse, 'outcome' | 'source'>): void;
  /** Counts one message a broker source (amqp, kafka, nats) committed: stored, duplicate or stored dead. */
  recordBrokerIngestion(source: string, result: Pick<BrokerIngestResult, 'status'>): void;
  recordRelayDrain(report: RelayDrainReport): void;
  recordOutboxDrain(report: OutboxDrainReport): void;
  /** Observes the delivery latency (created_at → settled) of every row settled as sent, per destination. */
  recordSettled(rows: readonly SettledOutboxRow[]): void;
  /** Sets the row gauges from `store.admin.stats()`. */
  recordStats(stats: AdminStats): void;
  /** Counts the rows one retention run deleted. */
  recordRetention(report: RetentionReport): void;
  /** Counts a drain that threw (the loop tries again after the poll interval). */
  recordDrainError(loop: 'relay' | 'outbox'): void;
  /** Counts a failed stats refresh or retention run (both try again at their next interval). */
  recordMaintenanceError(task: 'stats' | 'retention'): void;
  /** Whether the wake-up listener (LISTEN/NOTIFY) is in place: 1 or 0. */
  recordWakeUpListening(listening: boolean): void;
}

/** Options of {@link createQueueBoxMetrics}. */
export interface QueueBoxMetricsOptions {
  /** Default a new registry. */
  readonly registry?: MetricsRegistry;
  /** Sources whose `accepted` / `duplicate` series start at 0 (HTTP and broker sources). Default none. */
  readonly sources?: readonly string[];
  /** Destinations whose latency histogram starts empty but present. Default none. */
  readonly destinations?: readonly string[];
  /** Buckets of the latency histogram, in seconds. Default {@link DEFAULT_LATENCY_BUCKETS_SECONDS}. */
  readonly latencyBuckets?: readonly number[];
}

const STATE_WORDS: Readonly<Record<Table, Readonly<Record<MessageState, string>>>> = {
  outbox: { Pending: 'pending', Processing: 'processing', Sent: 'sent', Dead: 'dead', Failed: 'unknown' },
  inbox: { Pending: 'pending', Processing: 'processing', Sent: 'processed', Dead: 'dead', Failed: 'unknown' },
};

/**
 * Creates the QueueBox metrics:
 * counters `queuebox_inbox_accepted_total{source}`, `queuebox_inbox_duplicate_total{source}`,
 * `queuebox_inbox_rejected_total{source,reason}` (reason = the ingestion outcome, e.g. `unauthorized`),
 * `queuebox_relay_forwarded_total`, `queuebox_outbox_sent_total`, `queuebox_outbox_retried_total`,
 * `queuebox_dead_total{table}`, `queuebox_outbox_released_total`, `queuebox_reclaimed_total{table}`,
 * `queuebox_stale_claims_total{table}`, `queuebox_drain_errors_total{loop}`,
 * `queuebox_retention_deleted_total{table,state}`, `queuebox_maintenance_errors_total{task}`;
 * histogram `queuebox_outbox_delivery_latency_seconds{destination}` (created_at → sent, by the database's
 * created_at and this process's clock); gauges `queuebox_rows{table,state}`, `queuebox_dead_rows{table}`,
 * `queuebox_oldest_pending_age_seconds{table}` (0 when no pending row is due) and `queuebox_wakeup_listening`.
 */
export function createQueueBoxMetrics(options: QueueBoxMetricsOptions = {}): QueueBoxMetrics {
  const registry = options.registry ?? createMetricsRegistry();
  const accepted = registry.counter(
    'queuebox_inbox_accepted_total',
    'Inbox messages stored (HTTP 202, or a new broker message).',
  );
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
  const dead = registry.counter(
    'queuebox_dead_total',
    'Rows that went dead, by table (inbox: also broker messages stored dead).',
  );
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
  const retentionDeleted = registry.counter(
    'queuebox_retention_deleted_total',
    'Finished rows deleted by retention, by table and state.',
  );
  const maintenanceErrors = registry.counter(
    'queuebox_maintenance_errors_total',
    'Failed stats refreshes and retention runs, by task.',
  );
  const latency = registry.histogram(
    'queuebox_outbox_delivery_latency_seconds',
    "Time from an outbox row's insert (created_at) to its delivery, by destination.",
    options.latencyBuckets,
  );
  const rows = registry.gauge('queuebox_rows', 'Rows per table and state, at the last stats refresh.');
  const deadRows = registry.gauge('queuebox_dead_rows', 'Dead rows per table, at the last stats refresh.');
  const oldestPending = registry.gauge(
    'queuebox_oldest_pending_age_seconds',
    'How long the longest-waiting due pending row has been due, per table (0 when none), at the last stats refresh.',
  );
  const listening = registry.gauge(
    'queuebox_wakeup_listening',
    '1 while the LISTEN/NOTIFY wake-up listener is connected, else 0 (polling still delivers).',
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
  for (const task of ['stats', 'retention']) maintenanceErrors.inc({ task }, 0);
  for (const destination of options.destinations ?? []) latency.touch({ destination });

  return {
    registry,
    recordIngestion({ outcome, source }) {
      const labels = { source: source ?? '' };
      if (outcome === 'accepted') accepted.inc(labels);
      else if (outcome === 'duplicate') duplicate.inc(labels);
      // A provider's handshake (Slack's url_verification) is neither a message nor a refusal.
      else if (outcome !== 'handshake') rejected.inc({ ...labels, reason: outcome });
    },
    recordBrokerIngestion(source, { status }) {
      if (status === 'stored') accepted.inc({ source });
      else if (status === 'duplicate') duplicate.inc({ source });
      else dead.inc({ table: 'inbox' });
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
    recordSettled(settled) {
      for (const { row, outcome, destination, settledAt } of settled) {
        if (outcome !== 'sent' || destination === null) continue;
        // created_at is the database's clock, settledAt this process's: a skew between them must not go negative.
        latency.observe({ destination }, Math.max(0, settledAt - row.createdAt.getTime()) / 1000);
      }
    },
    recordStats(stats) {
      for (const table of ['outbox', 'inbox'] as const) {
        const { counts, oldestPendingAgeMs } = stats[table];
        for (const [state, count] of Object.entries(counts) as [MessageState, number][]) {
          rows.set({ table, state: STATE_WORDS[table][state] }, count);
        }
        deadRows.set({ table }, counts.Dead);
        oldestPending.set({ table }, (oldestPendingAgeMs ?? 0) / 1000);
      }
    },
    recordRetention(report) {
      const { outbox, inbox } = report.deleted;
      const kinds = [
        ['outbox', 'sent', outbox.sent],
        ['outbox', 'dead', outbox.dead],
        ['inbox', 'processed', inbox.processed],
        ['inbox', 'dead', inbox.dead],
      ] as const;
      for (const [table, state, n] of kinds) if (n > 0) retentionDeleted.inc({ table, state }, n);
    },
    recordDrainError(loop) {
      drainErrors.inc({ loop });
    },
    recordMaintenanceError(task) {
      maintenanceErrors.inc({ task });
    },
    recordWakeUpListening(on) {
      listening.set({}, on ? 1 : 0);
    },
  };
}
