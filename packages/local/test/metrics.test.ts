import type { OutboxDrainReport } from '@queuebox/outbox';
import { describe, expect, it } from 'vitest';
import { createQueueBoxMetrics, PROMETHEUS_CONTENT_TYPE } from '../src/metrics.ts';

function anOutboxDrainReport(overrides: Partial<OutboxDrainReport> = {}): OutboxDrainReport {
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

/**
 * The samples of a Prometheus text exposition, keyed `name{a="1",b="2"}` with the labels sorted by name, so a check
 * does not depend on the order a library writes labels in.
 */
function samplesOf(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const [, name, labelText = '', value = ''] = match;
    const labels = [...labelText.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)]
      .map(([, label, text]) => `${label}="${text}"`)
      .sort();
    samples.set(
      `${name}${labels.length > 0 ? `{${labels.join(',')}}` : ''}`,
      Number(value.replace('+Inf', 'Infinity')),
    );
  }
  return samples;
}

describe('the /metrics text', () => {
  it('is Prometheus text 0.0.4 with every QueueBox metric, its HELP and its kind', async () => {
    // Act
    const text = await createQueueBoxMetrics({
      sources: ['demo', 'orders-in'],
      brokerSources: ['orders-in'],
      destinations: ['billing'],
    }).registry.metrics();

    // Assess
    const kinds = Object.fromEntries(
      [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, kind]) => [name, kind]),
    );
    expect(PROMETHEUS_CONTENT_TYPE).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(kinds).toEqual({
      queuebox_inbox_accepted_total: 'counter',
      queuebox_inbox_duplicate_total: 'counter',
      queuebox_inbox_rejected_total: 'counter',
      queuebox_relay_forwarded_total: 'counter',
      queuebox_outbox_sent_total: 'counter',
      queuebox_outbox_retried_total: 'counter',
      queuebox_dead_total: 'counter',
      queuebox_outbox_released_total: 'counter',
      queuebox_reclaimed_total: 'counter',
      queuebox_stale_claims_total: 'counter',
      queuebox_drain_errors_total: 'counter',
      queuebox_retention_deleted_total: 'counter',
      queuebox_maintenance_errors_total: 'counter',
      queuebox_outbox_delivery_latency_seconds: 'histogram',
      queuebox_rows: 'gauge',
      queuebox_dead_rows: 'gauge',
      queuebox_oldest_pending_age_seconds: 'gauge',
      queuebox_wakeup_listening: 'gauge',
      queuebox_wakeup_outbox_aside: 'gauge',
      queuebox_broker_consumer_failures: 'gauge',
    });
    expect(text.match(/^# HELP /gm)).toHaveLength(Object.keys(kinds).length);
    // Series that exist from the start read 0, so rates and alerts work at once.
    const samples = samplesOf(text);
    expect(samples.get('queuebox_relay_forwarded_total')).toBe(0);
    expect(samples.get('queuebox_inbox_accepted_total{source="demo"}')).toBe(0);
    expect(samples.get('queuebox_broker_consumer_failures{source="orders-in"}')).toBe(0);
    expect(samples.get('queuebox_dead_total{table="inbox"}')).toBe(0);
    expect(samples.get('queuebox_outbox_delivery_latency_seconds_count{destination="billing"}')).toBe(0);
  });

  it('writes cumulative histogram buckets with +Inf, sum and count, and escapes label values', async () => {
    // Prepare
    const metrics = createQueueBoxMetrics({ latencyBuckets: [0.1, 1] });
    const row = (createdAt: number, settledAt: number, destination: string) => ({
      row: { createdAt: new Date(createdAt) } as never,
      outcome: 'sent' as const,
      destination,
      settledAt,
      latencyMs: settledAt - createdAt,
    });

    // Act
    metrics.recordSettled([row(0, 50, 'a'), row(0, 500, 'a'), row(0, 7_000, 'a')]);
    metrics.recordIngestion({ outcome: 'accepted', source: 'say "hi"\\\n' });
    const text = await metrics.registry.metrics();

    // Assess
    const samples = samplesOf(text);
    expect(samples.get('queuebox_outbox_delivery_latency_seconds_bucket{destination="a",le="0.1"}')).toBe(1);
    expect(samples.get('queuebox_outbox_delivery_latency_seconds_bucket{destination="a",le="1"}')).toBe(2);
    expect(samples.get('queuebox_outbox_delivery_latency_seconds_bucket{destination="a",le="+Inf"}')).toBe(3);
    expect(samples.get('queuebox_outbox_delivery_latency_seconds_sum{destination="a"}')).toBeCloseTo(7.55);
    expect(samples.get('queuebox_outbox_delivery_latency_seconds_count{destination="a"}')).toBe(3);
    expect(text).toContain('queuebox_inbox_accepted_total{source="say \\"hi\\"\\\\\\n"} 1');
  });
});

describe('QueueBox metrics', () => {
  it('counts ingestion answers by outcome and source', async () => {
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
    const text = await metrics.registry.metrics();
    expect(text).toContain('queuebox_inbox_accepted_total{source="demo"} 2');
    expect(text).toContain('queuebox_inbox_accepted_total{source="other"} 0');
    expect(text).toContain('queuebox_inbox_duplicate_total{source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="unauthorized",source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="unknown_source",source=""} 1');
    // A handshake is neither a message nor a refusal.
    expect(text).not.toContain('reason="handshake"');
  });

  it('adds up drain reports: forwarded, sent, dead per table, reclaimed, stale (retried and settled dead come from the settles)', async () => {
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
      stoppedFor: 'empty',
    });
    metrics.recordOutboxDrain(
      anOutboxDrainReport({
        claimed: 5,
        sent: 3,
        retried: 1,
        dead: 1,
        stale: 2,
        reclaimed: { returned: 0, dead: 1 },
      }),
    );
    metrics.recordOutboxDrain(anOutboxDrainReport({ claimed: 1, sent: 1 }));
    metrics.recordDrainError('outbox');

    const text = await metrics.registry.metrics();
    expect(text).toContain('queuebox_relay_forwarded_total 3');
    expect(text).toContain('queuebox_outbox_sent_total 4');
    // The report's retried and dead rows are its settles', counted by destination from `recordSettled`: not twice.
    expect([...samplesOf(text).keys()].filter((name) => name.startsWith('queuebox_outbox_retried'))).toEqual(
      [],
    );
    expect(text).toContain('queuebox_dead_total{table="inbox"} 2');
    expect(text).toContain('queuebox_dead_total{table="outbox"} 1');
    expect(text).toContain('queuebox_reclaimed_total{table="inbox"} 1');
    expect(text).toContain('queuebox_stale_claims_total{table="outbox"} 2');
    expect(text).toContain('queuebox_drain_errors_total{loop="outbox"} 1');
    expect(text).toContain('queuebox_drain_errors_total{loop="relay"} 0');
  });
});

describe('QueueBox metrics: latency, gauges, broker sources, retention', () => {
  const aSettledRow = (over: {
    outcome?: 'sent' | 'retried' | 'dead' | 'released';
    destination?: string | null;
    createdAt?: number;
    settledAt?: number;
    latencyMs?: number;
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
    latencyMs: over.latencyMs ?? 250,
  });

  it("observes each sent row's latency, per destination", async () => {
    // Prepare
    const metrics = createQueueBoxMetrics({ destinations: ['billing', 'idle'] });
    // Act
    metrics.recordSettled([
      aSettledRow({}),
      aSettledRow({ createdAt: 2_000, settledAt: 1_000, latencyMs: 0 }),
      aSettledRow({ outcome: 'retried' }),
      aSettledRow({ outcome: 'dead', destination: null }),
    ]);
    // Assess
    const text = await metrics.registry.metrics();
    expect(text).toContain('queuebox_outbox_delivery_latency_seconds_count{destination="billing"} 2');
    expect(text).toContain('queuebox_outbox_delivery_latency_seconds_sum{destination="billing"} 0.25');
    expect(
      samplesOf(text).get(
        'queuebox_outbox_delivery_latency_seconds_bucket{destination="billing",le="0.005"}',
      ),
    ).toBe(1);
    expect(text).toContain('queuebox_outbox_delivery_latency_seconds_count{destination="idle"} 0');
  });

  it('counts retried and settled-dead outbox rows by destination, one series per destination, never per row', async () => {
    // Prepare: two destinations configured; one of them fails.
    const metrics = createQueueBoxMetrics({ destinations: ['billing', 'crm'] });
    // Act
    metrics.recordSettled([
      aSettledRow({ outcome: 'retried', destination: 'billing' }),
      aSettledRow({ outcome: 'retried', destination: 'billing' }),
      aSettledRow({ outcome: 'dead', destination: 'billing' }),
      aSettledRow({ outcome: 'sent', destination: 'crm' }),
      aSettledRow({ outcome: 'dead', destination: null }),
      aSettledRow({ outcome: 'released', destination: null }),
    ]);
    metrics.recordSettled([aSettledRow({ outcome: 'retried', destination: 'billing' })]);
    // Assess
    const samples = samplesOf(await metrics.registry.metrics());
    expect(samples.get('queuebox_outbox_retried_total{destination="billing"}')).toBe(3);
    expect(samples.get('queuebox_outbox_retried_total{destination="crm"}')).toBe(0);
    expect(samples.get('queuebox_dead_total{destination="billing",table="outbox"}')).toBe(1);
    expect(samples.get('queuebox_dead_total{table="outbox"}')).toBe(1);
    expect(samples.get('queuebox_dead_total{table="inbox"}')).toBe(0);
    const series = [...samples.keys()].filter(
      (name) => name.startsWith('queuebox_outbox_retried') || name.startsWith('queuebox_dead_total'),
    );
    expect(series.sort()).toEqual([
      'queuebox_dead_total{destination="billing",table="outbox"}',
      'queuebox_dead_total{destination="crm",table="outbox"}',
      'queuebox_dead_total{table="inbox"}',
      'queuebox_dead_total{table="outbox"}',
      'queuebox_outbox_retried_total{destination="billing"}',
      'queuebox_outbox_retried_total{destination="crm"}',
    ]);
  });

  it('sets the row gauges from the admin stats', async () => {
    const metrics = createQueueBoxMetrics();
    const counts = (dead: number) => ({ Pending: 2, Processing: 1, Sent: 7, Dead: dead, Failed: 0 });

    metrics.recordStats({
      outbox: { counts: counts(3), oldestPendingAgeMs: 4_500, deadByTopic: {} },
      inbox: { counts: counts(0), oldestPendingAgeMs: null, deadBySource: {} },
    });

    const text = await metrics.registry.metrics();
    expect(text).toContain('queuebox_dead_rows{table="outbox"} 3');
    expect(text).toContain('queuebox_dead_rows{table="inbox"} 0');
    expect(text).toContain('queuebox_oldest_pending_age_seconds{table="outbox"} 4.5');
    expect(text).toContain('queuebox_oldest_pending_age_seconds{table="inbox"} 0');
    expect(text).toContain('queuebox_rows{state="sent",table="outbox"} 7');
    expect(text).toContain('queuebox_rows{state="processed",table="inbox"} 7');
  });

  it('counts broker messages by status and retention deletes by table and state', async () => {
    const metrics = createQueueBoxMetrics({ sources: ['orders-in'] });

    metrics.recordBrokerIngestion('orders-in', { status: 'stored' });
    metrics.recordBrokerIngestion('orders-in', { status: 'duplicate' });
    metrics.recordBrokerIngestion('orders-in', { status: 'dead' });
    metrics.recordRetention({
      deleted: { outbox: { sent: 5, dead: 0 }, inbox: { processed: 2, dead: 1 } },
      total: 8,
      batches: 4,
      complete: true,
      unfinished: [],
    });

    const text = await metrics.registry.metrics();
    expect(text).toContain('queuebox_inbox_accepted_total{source="orders-in"} 1');
    expect(text).toContain('queuebox_inbox_duplicate_total{source="orders-in"} 1');
    expect(text).toContain('queuebox_dead_total{table="inbox"} 1');
    expect(text).toContain('queuebox_retention_deleted_total{state="sent",table="outbox"} 5');
    expect(text).toContain('queuebox_retention_deleted_total{state="dead",table="inbox"} 1');
    // Every kind starts at 0, so the first run's deletes show in increase().
    expect(text).toContain('queuebox_retention_deleted_total{state="dead",table="outbox"} 0');
  });

  it('starts every labelled counter series at 0: per-destination dead, per-source rejections, retention', async () => {
    // Prepare / Act: a metrics set before anything happened.
    const metrics = createQueueBoxMetrics({
      sources: ['hooks', 'orders-in'],
      httpSources: ['hooks'],
      destinations: ['billing'],
    });
    // Assess: present at 0, so increase() and rate() count the first event (a series born at 1 counts 0).
    const samples = samplesOf(await metrics.registry.metrics());
    const zeros = [...samples.entries()].filter(([, value]) => value === 0).map(([name]) => name);
    expect(zeros).toEqual(
      expect.arrayContaining([
        'queuebox_dead_total{destination="billing",table="outbox"}',
        'queuebox_inbox_rejected_total{reason="unauthorized",source="hooks"}',
        'queuebox_inbox_rejected_total{reason="payload_too_large",source="hooks"}',
        'queuebox_inbox_rejected_total{reason="store_unavailable",source="hooks"}',
        'queuebox_inbox_rejected_total{reason="transform_timeout",source="hooks"}',
        'queuebox_inbox_rejected_total{reason="unknown_source",source=""}',
        'queuebox_inbox_rejected_total{reason="method_not_allowed",source=""}',
        'queuebox_retention_deleted_total{state="processed",table="inbox"}',
        'queuebox_retention_deleted_total{state="sent",table="outbox"}',
      ]),
    );
    const rejected = [...samples.keys()].filter((name) => name.startsWith('queuebox_inbox_rejected_total'));
    // Eight reasons for the HTTP source; unknown_source and method_not_allowed once, without one (a 405 is answered
    // before the path is looked up); none for the broker source.
    expect(rejected).toHaveLength(10);
    expect(rejected.filter((name) => name.includes('orders-in'))).toEqual([]);
  });
});
