import type { RetentionReport } from '@queuebox/admin';
import type {
  AdminGauges,
  AdminStats,
  AdminTableGauges,
  AdminTableStats,
  BrokerIngestResult,
  MessageState,
  Table,
} from '@queuebox/core';
import type { IngestOutcome, IngestResponse, RelayDrainReport } from '@queuebox/inbox';
import type { OutboxDrainReport, SettledOutboxRow } from '@queuebox/outbox';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The content type of the registry's text (`await registry.metrics()`): Prometheus text format 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/**
 * Default histogram buckets, in seconds: from 5 ms (a wake-up on a quiet database) to an hour (a row that waited
 * out retries with back-off).
 */
export const DEFAULT_LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
];

/**
 * Every reason an inbox request is counted as rejected (`IngestOutcome` less what is not a refusal): a record, so
 * an outcome added to the type without a place here fails to compile. `unknown_source` and `method_not_allowed` are
 * counted without a source (`source=""`).
 */
const REJECTIONS: Record<
  Exclude<IngestOutcome, 'accepted' | 'duplicate' | 'handshake'>,
  'per source' | 'once'
> = {
  // Answered before the path is looked up, so counted without a source, as an unknown one.
  method_not_allowed: 'once',
  unknown_source: 'once',
  payload_too_large: 'per source',
  unsupported_media_type: 'per source',
  unauthorized: 'per source',
  invalid_message: 'per source',
  transform_rejected: 'per source',
  store_unavailable: 'per source',
  transform_timeout: 'per source',
  internal_error: 'per source',
};

/** The (table, state) pairs retention deletes, as `RetentionReport.deleted` holds them. */
const RETENTION_KINDS = [
  ['outbox', 'sent'],
  ['outbox', 'dead'],
  ['inbox', 'processed'],
  ['inbox', 'dead'],
] as const;

/** The metrics of the local runtime, fed from ingestion answers, drain reports, settles and stats. */
export interface QueueBoxMetrics {
  /** The prom-client registry of every QueueBox metric: `await registry.metrics()` is the `/metrics` text. */
  readonly registry: Registry;
  /** Counts one answered inbox request by its outcome. */
  recordIngestion(response: Pick<IngestResponse, 'outcome' | 'source'>): void;
  /** Counts one message a broker source (amqp, kafka, nats) committed: stored, duplicate or stored dead. */
  recordBrokerIngestion(source: string, result: Pick<BrokerIngestResult, 'status'>): void;
  recordRelayDrain(report: RelayDrainReport): void;
  /**
   * Counts what an outbox drain sent, released, reclaimed (and sent dead in its reclaim step) and found stale. Its
   * retried and dead rows are counted by {@link recordSettled}, by destination: give it the poller's `onSettled`.
   */
  recordOutboxDrain(report: OutboxDrainReport): void;
  /**
   * Per destination, from the poller's `onSettled`: observes the delivery latency (created_at → settled) of every
   * row settled as sent, and counts the rows retried (`queuebox_outbox_retried_total{destination}`) and settled
   * dead (`queuebox_dead_total{destination,table="outbox"}`; without `destination` when no route matched).
   */
  recordSettled(rows: readonly SettledOutboxRow[]): void;
  /** Sets the row gauges from `store.admin.stats()` (exact counts of every state). */
  recordStats(stats: AdminStats): void;
  /**
   * Sets the row gauges from `store.admin.gauges()`, what the periodic refresh reads: exact counts of the pending,
   * processing, dead and unknown-state rows; the sent/processed series from the table's statistics (an estimate),
   * left as they were while the database has none.
   */
  recordGauges(gauges: AdminGauges): void;
  /** Counts the rows one retention run deleted. */
  recordRetention(report: RetentionReport): void;
  /** Counts a drain that threw (the loop tries again after the poll interval). */
  recordDrainError(loop: 'relay' | 'outbox'): void;
  /** Counts a failed stats refresh or retention run (both try again at their next interval). */
  recordMaintenanceError(task: 'stats' | 'retention'): void;
  /** Whether the wake-up listener (LISTEN/NOTIFY) is in place: 1 or 0. */
  recordWakeUpListening(listening: boolean): void;
  /** Whether the outbox's wake-up listener stepped aside under load (the drain polls every few ms): 1 or 0. */
  recordWakeUpAside(aside: boolean): void;
  /**
   * A broker source's failures in a row (connect, consume, ingest: what its consumer reported) since it last
   * stored a message; 0 again after one.
   */
  recordBrokerConsumerFailures(source: string, failures: number): void;
}

/** Options of {@link createQueueBoxMetrics}. */
export interface QueueBoxMetricsOptions {
  /** Default a new registry (never prom-client's global one). */
  readonly registry?: Registry;
  /** Sources whose `accepted` / `duplicate` series start at 0 (HTTP and broker sources). Default none. */
  readonly sources?: readonly string[];
  /** Broker sources whose `queuebox_broker_consumer_failures` gauge starts at 0. Default none. */
  readonly brokerSources?: readonly string[];
  /** HTTP sources whose `rejected` series start at 0, one per reason (`REJECTION_REASONS`). Default none. */
  readonly httpSources?: readonly string[];
  /** Destinations whose latency histogram and retried series start empty but present (at 0). Default none. */
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
 * `queuebox_relay_forwarded_total`, `queuebox_outbox_sent_total`, `queuebox_outbox_retried_total{destination}`,
 * `queuebox_dead_total{table}` (outbox rows a settle sent dead: `{destination,table}`),
 * `queuebox_outbox_released_total`, `queuebox_reclaimed_total{table}`,
 * `queuebox_stale_claims_total{table}`, `queuebox_drain_errors_total{loop}`,
 * `queuebox_retention_deleted_total{table,state}`, `queuebox_maintenance_errors_total{task}`;
 * histogram `queuebox_outbox_delivery_latency_seconds{destination}` (created_at → sent, by the database's
 * created_at and this process's clock); gauges `queuebox_rows{table,state}`, `queuebox_dead_rows{table}`,
 * `queuebox_oldest_pending_age_seconds{table}` (0 when no pending row is due), `queuebox_wakeup_listening`,
 * `queuebox_wakeup_outbox_aside` and `queuebox_broker_consumer_failures{source}`.
 */
export function createQueueBoxMetrics(options: QueueBoxMetricsOptions = {}): QueueBoxMetrics {
  const registry = options.registry ?? new Registry();
  const registers = [registry];
  // prom-client writes a series' labels in the order of the object that created it: every label object below
  // names its labels in alphabetical order, so the text reads the same whatever the call site.
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers });
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Gauge<L>({ name, help, labelNames, registers });

  const accepted = counter(
    'queuebox_inbox_accepted_total',
    'Inbox messages stored (HTTP 202, or a new broker message).',
    ['source'],
  );
  const duplicate = counter(
    'queuebox_inbox_duplicate_total',
    'Inbox messages already stored for their source and idempotency key (HTTP 200 duplicate).',
    ['source'],
  );
  const rejected = counter(
    'queuebox_inbox_rejected_total',
    'Inbox requests not stored, by reason (unauthorized, invalid_message, payload_too_large, ...).',
    ['reason', 'source'],
  );
  const forwarded = counter(
    'queuebox_relay_forwarded_total',
    'Inbox rows the relay forwarded into the outbox.',
  );
  const sent = counter('queuebox_outbox_sent_total', 'Outbox rows a destination accepted.');
  const retried = counter(
    'queuebox_outbox_retried_total',
    'Outbox deliveries that failed and were scheduled again, by destination.',
    ['destination'],
  );
  const dead = counter(
    'queuebox_dead_total',
    'Rows that went dead, by table (inbox: also broker messages stored dead); outbox rows a settle sent dead also by destination.',
    ['destination', 'table'],
  );
  const released = counter(
    'queuebox_outbox_released_total',
    'Claimed outbox rows given back untried (ordering hold-back, deadline, shutdown).',
  );
  const reclaimed = counter('queuebox_reclaimed_total', 'Expired claims returned to pending, by table.', [
    'table',
  ]);
  const stale = counter(
    'queuebox_stale_claims_total',
    'Settles refused because the claim had been lost, by table.',
    ['table'],
  );
  const drainErrors = counter(
    'queuebox_drain_errors_total',
    'Drains that failed (e.g. database unavailable), by loop.',
    ['loop'],
  );
  const retentionDeleted = counter(
    'queuebox_retention_deleted_total',
    'Finished rows deleted by retention, by table and state.',
    ['state', 'table'],
  );
  const maintenanceErrors = counter(
    'queuebox_maintenance_errors_total',
    'Failed stats refreshes and retention runs, by task.',
    ['task'],
  );
  const latency = new Histogram<'destination'>({
    name: 'queuebox_outbox_delivery_latency_seconds',
    help: "Time from an outbox row's insert (created_at) to its delivery, by destination.",
    labelNames: ['destination'],
    buckets: [...(options.latencyBuckets ?? DEFAULT_LATENCY_BUCKETS_SECONDS)],
    registers,
  });
  const rows = gauge(
    'queuebox_rows',
    "Rows per table and state, at the last stats refresh; state sent (outbox) and processed (inbox) are an estimate from the database's table statistics (pg_class.reltuples, sys.partitions), the other states are exact.",
    ['state', 'table'],
  );
  const deadRows = gauge('queuebox_dead_rows', 'Dead rows per table, at the last stats refresh.', ['table']);
  const oldestPending = gauge(
    'queuebox_oldest_pending_age_seconds',
    'How long the longest-waiting due pending row has been due, per table (0 when none), at the last stats refresh.',
    ['table'],
  );
  const listening = gauge(
    'queuebox_wakeup_listening',
    '1 while the LISTEN/NOTIFY wake-up listener is connected, else 0 (polling still delivers).',
  );
  const aside = gauge(
    'queuebox_wakeup_outbox_aside',
    "1 while the outbox's wake-up listener has stepped aside under load (inserts notify nobody, so the application's commits do not wait for each other; the outbox drain polls every few milliseconds), else 0.",
  );
  const consumerFailures = gauge(
    'queuebox_broker_consumer_failures',
    "A broker source's failures in a row (connect, consume, ingest) since it last stored a message; 0 when it is healthy.",
    ['source'],
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
  for (const destination of options.destinations ?? []) {
    latency.zero({ destination });
    retried.inc({ destination }, 0);
    dead.inc({ destination, table: 'outbox' }, 0);
  }
  for (const [reason, scope] of Object.entries(REJECTIONS)) {
    if (scope === 'once') rejected.inc({ reason, source: '' }, 0);
    else for (const source of options.httpSources ?? []) rejected.inc({ reason, source }, 0);
  }
  for (const [table, state] of RETENTION_KINDS) retentionDeleted.inc({ state, table }, 0);
  for (const source of options.brokerSources ?? []) consumerFailures.set({ source }, 0);

  function recordGauges(gauges: AdminGauges): void {
    for (const table of ['outbox', 'inbox'] as const) {
      const { counts, finishedEstimate, oldestPendingAgeMs } = gauges[table];
      for (const [state, count] of Object.entries(counts) as [MessageState, number][]) {
        rows.set({ state: STATE_WORDS[table][state], table }, count);
      }
      if (finishedEstimate !== null) rows.set({ state: STATE_WORDS[table].Sent, table }, finishedEstimate);
      deadRows.set({ table }, counts.Dead);
      oldestPending.set({ table }, (oldestPendingAgeMs ?? 0) / 1000);
    }
  }

  return {
    registry,
    recordIngestion({ outcome, source }) {
      const labels = { source: source ?? '' };
      if (outcome === 'accepted') accepted.inc(labels);
      else if (outcome === 'duplicate') duplicate.inc(labels);
      // A provider's handshake (Slack's url_verification) is neither a message nor a refusal.
      else if (outcome !== 'handshake') rejected.inc({ reason: outcome, source: labels.source });
    },
    recordBrokerIngestion(source, { status }) {
      if (status === 'stored') accepted.inc({ source });
      else if (status === 'duplicate') duplicate.inc({ source });
      else dead.inc({ table: 'inbox' });
    },
    recordRelayDrain(report) {
      if (report.forwarded > 0) forwarded.inc(report.forwarded);
      if (report.dead > 0) dead.inc({ table: 'inbox' }, report.dead);
      if (report.reclaimed.returned > 0) reclaimed.inc({ table: 'inbox' }, report.reclaimed.returned);
      if (report.reclaimed.dead > 0) dead.inc({ table: 'inbox' }, report.reclaimed.dead);
      if (report.stale > 0) stale.inc({ table: 'inbox' }, report.stale);
    },
    recordOutboxDrain(report) {
      if (report.sent > 0) sent.inc(report.sent);
      // Retried rows and rows a settle sent dead are counted by destination from the settles (`recordSettled`).
      if (report.released > 0) released.inc(report.released);
      if (report.reclaimed.returned > 0) reclaimed.inc({ table: 'outbox' }, report.reclaimed.returned);
      if (report.reclaimed.dead > 0) dead.inc({ table: 'outbox' }, report.reclaimed.dead);
      if (report.stale > 0) stale.inc({ table: 'outbox' }, report.stale);
    },
    recordSettled(settled) {
      for (const { outcome, destination, latencyMs } of settled) {
        if (outcome === 'retried' && destination !== null) retried.inc({ destination });
        // No route matched (destination null): the series without a destination, as rows the reclaim sent dead.
        if (outcome === 'dead')
          dead.inc(destination === null ? { table: 'outbox' } : { destination, table: 'outbox' });
        if (outcome !== 'sent' || destination === null) continue;
        latency.observe({ destination }, latencyMs / 1000);
      }
    },
    recordStats(stats) {
      // The exact counts are gauges whose finished rows are counted, not estimated.
      const asGauges = ({ counts, oldestPendingAgeMs }: AdminTableStats): AdminTableGauges => {
        const { Sent: finishedEstimate, ...unfinished } = counts;
        return { counts: unfinished, finishedEstimate, oldestPendingAgeMs };
      };
      recordGauges({ outbox: asGauges(stats.outbox), inbox: asGauges(stats.inbox) });
    },
    recordGauges,
    recordRetention(report) {
      const { outbox, inbox } = report.deleted;
      const deleted = { outbox, inbox } as const;
      for (const [table, state] of RETENTION_KINDS) {
        const n = (deleted[table] as Record<typeof state, number>)[state];
        if (n > 0) retentionDeleted.inc({ state, table }, n);
      }
    },
    recordDrainError(loop) {
      drainErrors.inc({ loop });
    },
    recordMaintenanceError(task) {
      maintenanceErrors.inc({ task });
    },
    recordWakeUpListening(on) {
      listening.set(on ? 1 : 0);
    },
    recordWakeUpAside(on) {
      aside.set(on ? 1 : 0);
    },
    recordBrokerConsumerFailures(source, failures) {
      consumerFailures.set({ source }, failures);
    },
  };
}
