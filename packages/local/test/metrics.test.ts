import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, createQueueBoxMetrics } from '../src/metrics.ts';

function anOutboxDrainReport(overrides: Partial<Record<string, number>> = {}) {
  return {
    reclaimed: { returned: 0, dead: 0 },
    batches: 1,
    claimed: 0,
    sent: 0,
    retried: 0,
    dead: 0,
    released: 0,
    stale: 0,
    stoppedFor: 'empty' as const,
    ...overrides,
  };
}

describe('metrics registry', () => {
  it('renders counters in the Prometheus text format with HELP, TYPE and sorted, escaped labels', () => {
    // Prepare
    const registry = createMetricsRegistry();
    const counter = registry.counter('qb_things_total', 'Things.\nCounted.');
    // Act
    counter.inc({ source: 'b', reason: 'say "hi"\\\n' }, 2);
    counter.inc({ reason: 'say "hi"\\\n', source: 'b' });
    // Assess
    expect(registry.render()).toBe(
      '# HELP qb_things_total Things.\\nCounted.\n' +
        '# TYPE qb_things_total counter\n' +
        'qb_things_total{reason="say \\"hi\\"\\\\\\n",source="b"} 3\n',
    );
  });

  it('shows a counter without any series as 0', () => {
    const registry = createMetricsRegistry();
    registry.counter('qb_nothing_total', 'Nothing yet.');

    expect(registry.render()).toContain('\nqb_nothing_total 0\n');
  });

  it('refuses a negative increment and an invalid name', () => {
    const registry = createMetricsRegistry();

    expect(() => registry.counter('qb_x_total', 'x').inc({}, -1)).toThrow(/only goes up/);
    expect(() => registry.counter('qb-bad', 'x')).toThrow(/Invalid metric name/);
    expect(() => registry.counter('qb_y_total', 'y').inc({ 'bad-label': 'v' })).toThrow(/label name/);
  });
});

describe('QueueBox metrics', () => {
  it('counts ingestion answers by outcome and source', () => {
    // Prepare
    const metrics = createQueueBoxMetrics({ sources: ['demo', 'other'] });
    // Act
    metrics.recordIngestion({ outcome: 'accepted', source: 'demo' });
    metrics.recordIngestion({ outcome: 'accepted', source: 'demo' });
    metrics.recordIngestion({ outcome: 'duplicate', source: 'demo' });
    metrics.recordIngestion({ outcome: 'unauthorized', source: 'demo' });
    metrics.recordIngestion({ outcome: 'unknown_source' });
    metrics.recordIngestion({ outcome: 'handshake', source: 'demo' });
    // Assess
    const text = metrics.registry.render();
    expect(text).toContain('queuebox_inbox_accepted_total{source="demo"} 2');
    expect(text).toContain('queuebox_inbox_accepted_total{source="other"} 0');
    expect(text).toContain('queuebox_inbox_duplicate_total{source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="unauthorized",source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="unknown_source",source=""} 1');
    // A handshake is neither a message nor a refusal.
    expect(text).not.toContain('reason="handshake"');
  });

  it('adds up drain reports: forwarded, sent, retried, dead per table, reclaimed, stale', () => {
    const metrics = createQueueBoxMetrics();

    metrics.recordRelayDrain({
      enabled: true,
      reclaimed: { returned: 1, dead: 1 },
      claimed: 4,
      forwarded: 3,
      dead: 1,
      stale: 0,
      batches: 1,
      outboxIds: ['1', '2', '3'],
      drained: true,
    });
    metrics.recordOutboxDrain(anOutboxDrainReport({ claimed: 5, sent: 3, retried: 1, dead: 1, stale: 2 }));
    metrics.recordOutboxDrain(anOutboxDrainReport({ claimed: 1, sent: 1 }));
    metrics.recordDrainError('outbox');

    const text = metrics.registry.render();
    expect(text).toContain('queuebox_relay_forwarded_total 3');
    expect(text).toContain('queuebox_outbox_sent_total 4');
    expect(text).toContain('queuebox_outbox_retried_total 1');
    expect(text).toContain('queuebox_dead_total{table="inbox"} 2');
    expect(text).toContain('queuebox_dead_total{table="outbox"} 1');
    expect(text).toContain('queuebox_reclaimed_total{table="inbox"} 1');
    expect(text).toContain('queuebox_stale_claims_total{table="outbox"} 2');
    expect(text).toContain('queuebox_drain_errors_total{loop="outbox"} 1');
    expect(text).toContain('queuebox_drain_errors_total{loop="relay"} 0');
  });
});

describe('metrics registry: gauges and histograms', () => {
  it('renders a histogram with cumulative buckets, +Inf, sum and count per label set', () => {
    // Prepare
    const registry = createMetricsRegistry();
    const histogram = registry.histogram('qb_latency_seconds', 'Latency.', [0.1, 1]);
    // Act
    histogram.observe({ destination: 'a' }, 0.05);
    histogram.observe({ destination: 'a' }, 0.5);
    histogram.observe({ destination: 'a' }, 7);
    // Assess
    expect(registry.render()).toBe(
      '# HELP qb_latency_seconds Latency.\n' +
        '# TYPE qb_latency_seconds histogram\n' +
        'qb_latency_seconds_bucket{destination="a",le="0.1"} 1\n' +
        'qb_latency_seconds_bucket{destination="a",le="1"} 2\n' +
        'qb_latency_seconds_bucket{destination="a",le="+Inf"} 3\n' +
        'qb_latency_seconds_sum{destination="a"} 7.55\n' +
        'qb_latency_seconds_count{destination="a"} 3\n',
    );
    expect(histogram.count({ destination: 'a' })).toBe(3);
  });

  it('renders gauges as set, and none before the first set', () => {
    const registry = createMetricsRegistry();
    const gauge = registry.gauge('qb_rows', 'Rows.');
    const before = registry.render();

    gauge.set({ table: 'outbox' }, 3);
    gauge.set({ table: 'outbox' }, 2);

    expect(before).toBe('# HELP qb_rows Rows.\n# TYPE qb_rows gauge\n');
    expect(registry.render()).toContain('\nqb_rows{table="outbox"} 2\n');
    expect(gauge.value({ table: 'outbox' })).toBe(2);
  });

  it('refuses unsorted buckets, an "le" label, and one name for two kinds', () => {
    const registry = createMetricsRegistry();
    registry.counter('qb_a_total', 'a');

    expect(() => registry.histogram('qb_h', 'h', [1, 0.5])).toThrow(/ascending/);
    expect(() => registry.histogram('qb_h2', 'h').observe({ le: '1' }, 1)).toThrow(/"le"/);
    expect(() => registry.gauge('qb_a_total', 'a')).toThrow(/already registered as a counter/);
  });
});

describe('QueueBox metrics: latency, gauges, broker sources, retention', () => {
  const aSettledRow = (over: {
    outcome?: 'sent' | 'retried' | 'dead' | 'released';
    destination?: string | null;
    createdAt?: number;
    settledAt?: number;
  }) => ({
    row: {
      id: '1',
      topic: 't',
      key: null,
      payload: {},
      headers: {},
      state: 'Processing' as const,
      attempt: 0,
      maxAttempts: 3,
      scheduledAt: new Date(0),
      claimToken: 'c',
      leaseUntil: null,
      createdAt: new Date(over.createdAt ?? 1_000),
      updatedAt: new Date(0),
      sentAt: null,
      lastError: null,
      destination: null,
    },
    outcome: over.outcome ?? 'sent',
    destination: over.destination === undefined ? 'billing' : over.destination,
    settledAt: over.settledAt ?? 1_250,
  });

  it('observes created_at → settle for sent rows only, per destination, never below 0', () => {
    // Prepare
    const metrics = createQueueBoxMetrics({ destinations: ['billing', 'idle'] });
    // Act
    metrics.recordSettled([
      aSettledRow({}),
      aSettledRow({ createdAt: 2_000, settledAt: 1_000 }),
      aSettledRow({ outcome: 'retried' }),
      aSettledRow({ outcome: 'dead', destination: null }),
    ]);
    // Assess
    const text = metrics.registry.render();
    expect(text).toContain('queuebox_outbox_delivery_latency_seconds_count{destination="billing"} 2');
    expect(text).toContain('queuebox_outbox_delivery_latency_seconds_sum{destination="billing"} 0.25');
    expect(text).toContain(
      'queuebox_outbox_delivery_latency_seconds_bucket{destination="billing",le="0.005"} 1',
    );
    expect(text).toContain('queuebox_outbox_delivery_latency_seconds_count{destination="idle"} 0');
  });

  it('sets the row gauges from the admin stats', () => {
    const metrics = createQueueBoxMetrics();
    const counts = (dead: number) => ({ Pending: 2, Processing: 1, Sent: 7, Dead: dead, Failed: 0 });

    metrics.recordStats({
      outbox: { counts: counts(3), oldestPendingAgeMs: 4_500, deadByTopic: {} },
      inbox: { counts: counts(0), oldestPendingAgeMs: null, deadBySource: {} },
    });

    const text = metrics.registry.render();
    expect(text).toContain('queuebox_dead_rows{table="outbox"} 3');
    expect(text).toContain('queuebox_dead_rows{table="inbox"} 0');
    expect(text).toContain('queuebox_oldest_pending_age_seconds{table="outbox"} 4.5');
    expect(text).toContain('queuebox_oldest_pending_age_seconds{table="inbox"} 0');
    expect(text).toContain('queuebox_rows{state="sent",table="outbox"} 7');
    expect(text).toContain('queuebox_rows{state="processed",table="inbox"} 7');
  });

  it('counts broker messages by status and retention deletes by table and state', () => {
    const metrics = createQueueBoxMetrics({ sources: ['orders-in'] });

    metrics.recordBrokerIngestion('orders-in', { status: 'stored' });
    metrics.recordBrokerIngestion('orders-in', { status: 'duplicate' });
    metrics.recordBrokerIngestion('orders-in', { status: 'dead' });
    metrics.recordRetention({
      deleted: { outbox: { sent: 5, dead: 0 }, inbox: { processed: 2, dead: 1 } },
      total: 8,
      batches: 4,
      complete: true,
    });

    const text = metrics.registry.render();
    expect(text).toContain('queuebox_inbox_accepted_total{source="orders-in"} 1');
    expect(text).toContain('queuebox_inbox_duplicate_total{source="orders-in"} 1');
    expect(text).toContain('queuebox_dead_total{table="inbox"} 1');
    expect(text).toContain('queuebox_retention_deleted_total{state="sent",table="outbox"} 5');
    expect(text).toContain('queuebox_retention_deleted_total{state="dead",table="inbox"} 1');
    expect(text).not.toContain('queuebox_retention_deleted_total{state="dead",table="outbox"}');
  });
});
