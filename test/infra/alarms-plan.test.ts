import { describe, expect, it } from 'vitest';
import { planAlarms } from '../../infra/alarms-plan.ts';
import { planFunctions } from '../../infra/functions-plan.ts';
import { aConfig, aKafkaSource, anSqsSource } from './fixtures.ts';

describe('planAlarms', () => {
  it('alarms on dead rows and old pending rows per table, and on errors of every function but migrate', () => {
    // Prepare
    const config = aConfig({
      aws: {
        alarms: { oldestPendingAgeSeconds: 600, email: ['ops@example.com'] },
        functions: { maintenanceTick: { rateMinutes: 15 } },
      },
    });

    // Act
    const plan = planAlarms(config, planFunctions(config), {
      prefix: 'queuebox-prod',
      service: 'queuebox-prod',
    });

    // Assess
    expect(plan.topicName).toBe('queuebox-prod-alarms');
    expect(plan.emails).toEqual(['ops@example.com']);
    const deadOutbox = plan.alarms.find((a) => a.name === 'queuebox-prod-dead-rows-outbox');
    expect(deadOutbox).toMatchObject({
      namespace: 'QueueBox',
      metricName: 'DeadRows',
      dimensions: { service: 'queuebox-prod', Table: 'outbox' },
      statistic: 'Maximum',
      // The gauges come with the changes: a 5-minute period, not the maintenance rate.
      periodSeconds: 300,
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
    });
    expect(plan.alarms.find((a) => a.name === 'queuebox-prod-oldest-pending-inbox')).toMatchObject({
      metricName: 'OldestPendingAgeSeconds',
      dimensions: { Table: 'inbox' },
      threshold: 600,
    });
    const errors = plan.alarms.filter((a) => a.metricName === 'Errors').map((a) => a.function);
    expect(errors).toEqual(['outbox-tick', 'relay-tick', 'maintenance-tick', 'inbox-http', 'admin-http']);
  });

  it('alarms on any IngestFailures in 5 minutes when inbox-http or sqs-source exists, and not without them', () => {
    // Prepare
    const withHttp = aConfig();
    const withSqs = aConfig({ sources: { jobs: anSqsSource() }, routes: [] });
    const withNeither = aConfig({ sources: { clicks: aKafkaSource() }, routes: [] });
    const names = { prefix: 'queuebox-prod', service: 'queuebox-prod' };

    // Act
    const ingest = (config: ReturnType<typeof aConfig>) =>
      planAlarms(config, planFunctions(config), names).alarms.filter(
        (a) => a.metricName === 'IngestFailures',
      );

    // Assess
    const expected = {
      id: 'IngestFailuresAlarm',
      name: 'queuebox-prod-ingest-failures',
      namespace: 'QueueBox',
      metricName: 'IngestFailures',
      // The counters' dimension: the service alone, as Powertools adds it.
      dimensions: { service: 'queuebox-prod' },
      statistic: 'Sum',
      periodSeconds: 300,
      evaluationPeriods: 1,
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
      treatMissingData: 'notBreaching',
    };
    expect(ingest(withHttp)).toEqual([{ ...expected, description: expect.stringContaining('inbox-http') }]);
    expect(ingest(withSqs)).toEqual([{ ...expected, description: expect.stringContaining('sqs-source') }]);
    expect(ingest(withNeither)).toEqual([]);
  });

  it('alarms on any AdminFailures in 5 minutes (admin-http answers its 5xx instead of throwing)', () => {
    // Prepare
    const config = aConfig();

    // Act
    const plan = planAlarms(config, planFunctions(config), {
      prefix: 'queuebox-prod',
      service: 'queuebox-prod',
    });

    // Assess: the counter admin-http sends per 5xx answer, with the counters' { service } dimension.
    expect(plan.alarms.filter((a) => a.metricName === 'AdminFailures')).toEqual([
      {
        id: 'AdminFailuresAlarm',
        name: 'queuebox-prod-admin-failures',
        description: expect.stringContaining('admin-http answered 5xx'),
        namespace: 'QueueBox',
        metricName: 'AdminFailures',
        dimensions: { service: 'queuebox-prod' },
        statistic: 'Sum',
        periodSeconds: 300,
        evaluationPeriods: 1,
        threshold: 0,
        comparisonOperator: 'GreaterThanThreshold',
        treatMissingData: 'notBreaching',
      },
    ]);
    // Not planned without admin-http.
    const withoutAdmin = planFunctions(config).filter((fn) => fn.name !== 'admin-http');
    expect(
      planAlarms(config, withoutAdmin, { prefix: 'p', service: 's' }).alarms.map((a) => a.metricName),
    ).not.toContain('AdminFailures');
  });

  it("alarms on the age of each watched SQS queue's oldest message, from SQS's own metric", () => {
    // Prepare
    const config = aConfig({ aws: { alarms: { oldestPendingAgeSeconds: 600 } } });
    const queues = [
      { source: 'jobs', queueArn: 'arn:aws:sqs:eu-west-1:123456789012:jobs-in' },
      { source: 'orders', queueArn: 'arn:aws:sqs:eu-west-1:123456789012:orders.fifo' },
    ];

    // Act
    const plan = planAlarms(config, planFunctions(config), { prefix: 'qb-prod', service: 'qb-prod' }, queues);

    // Assess: a mapping that cannot poll moves no metric of QueueBox's; the queue's age grows.
    const ages = plan.alarms.filter((a) => a.namespace === 'AWS/SQS');
    expect(ages).toEqual([
      {
        id: 'JobsQueueAgeAlarm',
        name: 'qb-prod-sqs-oldest-jobs',
        description: expect.stringContaining('SQS queue jobs-in (source jobs) is older than 600 s'),
        namespace: 'AWS/SQS',
        metricName: 'ApproximateAgeOfOldestMessage',
        dimensions: { QueueName: 'jobs-in' },
        statistic: 'Maximum',
        periodSeconds: 300,
        evaluationPeriods: 1,
        threshold: 600,
        comparisonOperator: 'GreaterThanThreshold',
        treatMissingData: 'notBreaching',
      },
      expect.objectContaining({
        name: 'qb-prod-sqs-oldest-orders',
        dimensions: { QueueName: 'orders.fifo' },
      }),
    ]);
    expect(
      planAlarms(config, planFunctions(config), { prefix: 'p', service: 's' }).alarms,
    ).not.toContainEqual(expect.objectContaining({ namespace: 'AWS/SQS' }));
  });
});
