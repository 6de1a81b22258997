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
    // Assess
    const text = metrics.registry.render();
    expect(text).toContain('queuebox_inbox_accepted_total{source="demo"} 2');
    expect(text).toContain('queuebox_inbox_accepted_total{source="other"} 0');
    expect(text).toContain('queuebox_inbox_duplicate_total{source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="unauthorized",source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="unknown_source",source=""} 1');
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
