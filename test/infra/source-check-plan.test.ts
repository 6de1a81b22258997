/**
 * source-check (infra/source-check-plan.ts and its share of the other plans): with Kafka or Amazon MQ sources the
 * plan holds the function, its schedule, the `<service>-source-problems` alarm, its errors alarm, its one IAM
 * statement and its variables; the default install holds none of them, and its idle cost is unchanged.
 */
import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
import { describe, expect, it } from 'vitest';
import { functionPolicyStatements, longestPolicyRefs } from '../../infra/permissions-plan.ts';
import { planDeployment } from '../../infra/plan.ts';
import { PRICES } from '../../infra/prices.ts';
import { deployTimeVariables } from '../../infra/secrets-plan.ts';
import {
  aBrokerPlan,
  aConfigInput,
  aDeployConfig,
  aKafkaSource,
  anAmqpSource,
  anHttpSource,
  MQ_ARN,
  MQ_SECRET,
} from './fixtures.ts';

const planOf = (input: Record<string, unknown>) =>
  planDeployment(aDeployConfig(aConfigInput(input)), { app: 'queuebox', stage: 'prod', env: {} });

describe('source-check in the plan', () => {
  it('is planned with a schedule, the source-problems alarm, its errors alarm and only ListEventSourceMappings when Kafka and Amazon MQ sources exist', () => {
    // Act
    const plan = aBrokerPlan();

    // Assess
    const fn = plan.functions.find((f) => f.name === 'source-check');
    expect(fn).toMatchObject({ configKey: 'sourceCheck', rateMinutes: 15, timeoutSeconds: 30 });
    expect(plan.schedules.filter((s) => s.function === 'source-check')).toEqual([
      {
        id: 'SourceCheckSchedule',
        function: 'source-check',
        rateMinutes: 15,
        expression: 'cron(0/15 * * * ? *)',
      },
    ]);
    const alarm = plan.alarms.alarms.find((a) => a.name === 'queuebox-prod-source-problems');
    expect(alarm).toMatchObject({
      metricName: METRICS.sourceProblems,
      namespace: 'QueueBox',
      dimensions: { service: 'queuebox-prod' },
      statistic: 'Sum',
      // The check's rate: one datapoint per period while a mapping stays broken, so the alarm does not flap.
      periodSeconds: 900,
      evaluationPeriods: 1,
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
      treatMissingData: 'notBreaching',
    });
    expect(plan.alarms.alarms.map((a) => a.name)).toContain('queuebox-prod-errors-source-check');
    expect(functionPolicyStatements('source-check', plan, longestPolicyRefs(plan))).toEqual([
      {
        Sid: 'ListSourceMappings',
        Effect: 'Allow',
        Action: ['lambda:ListEventSourceMappings'],
        Resource: ['*'],
      },
    ]);
    expect(plan.sourceCheck?.targets).toEqual([
      { function: 'kafka-source', env: FUNCTION_ENV.kafkaSourceFunction },
      { function: 'amqp-source', env: FUNCTION_ENV.amqpSourceFunction },
    ]);
    expect(Object.keys(deployTimeVariables(plan, 'source-check'))).toEqual(
      expect.arrayContaining([
        FUNCTION_ENV.kafkaSourceFunction,
        FUNCTION_ENV.amqpSourceFunction,
        FUNCTION_ENV.disabledSourceMappings,
      ]),
    );
  });

  it('names the mappings created disabled by topic or queue, and only those', () => {
    // Prepare
    const input = {
      sources: {
        clicks: aKafkaSource({ topics: ['clicks', 'views'] }),
        orders: anAmqpSource(),
      },
      routes: [],
      destinations: {},
      aws: {
        sources: {
          clicks: { enabled: false },
          orders: { mqBrokerArn: MQ_ARN, auth: { type: 'basic', secretArn: MQ_SECRET } },
        },
      },
    };

    // Act
    const plan = planOf(input);

    // Assess
    expect(JSON.parse(plan.sourceCheck?.disabledMappings ?? '')).toEqual({
      'kafka-source': ['clicks', 'views'],
    });
  });

  it('is absent from the default install: no function, schedule, alarm, variables, or cost line of its own', () => {
    // Act
    const plan = planOf({});

    // Assess
    expect(plan.functions.map((f) => f.name)).not.toContain('source-check');
    expect(plan.schedules.map((s) => s.function)).not.toContain('source-check');
    expect(plan.alarms.alarms.filter((a) => a.name.includes('source'))).toEqual([]);
    expect(plan.sourceCheck).toBeUndefined();
    expect(plan.idleCost.items.map((i) => i.detail).join('\n')).not.toContain('source-check');
  });

  it('adds its invocations and two alarms to the idle cost, priced from prices.ts, and reads no secret', () => {
    // Prepare: two secret:// names (stripe's, billing's), which every other tick reads.
    const input = { sources: { stripe: anHttpSource(), clicks: aKafkaSource() } };
    const monthRuns = (rateMinutes: number) => (1440 / rateMinutes) * (730 / 24);
    // Every tick billed 0.5 s at its memory (512 MB here), as cost-plan.ts assumes.
    const tickUsd = (runs: number) =>
      (runs / 1e6) * PRICES.lambdaMillionRequests.usd + runs * 0.5 * 0.5 * PRICES.lambdaGbSecondArm.usd;

    // Act
    const plan = planOf(input);

    // Assess
    const items = new Map(plan.idleCost.items.map((i) => [i.item, i]));
    const others = plan.schedules.filter((s) => s.function !== 'source-check');
    const lambda = items.get('Lambda (scheduled ticks)');
    expect(lambda?.detail).toContain('source-check every 15 min');
    expect(lambda?.monthlyUsd).toBeCloseTo(
      tickUsd(others.reduce((n, s) => n + monthRuns(s.rateMinutes), 0)) + tickUsd(monthRuns(15)),
      10,
    );
    expect(
      plan.alarms.alarms.filter(
        (a) => a.name.endsWith('-source-problems') || a.name.endsWith('-errors-source-check'),
      ),
    ).toHaveLength(2);
    expect(items.get('CloudWatch alarms')?.monthlyUsd).toBeCloseTo(
      plan.alarms.alarms.length * PRICES.alarmMonth.usd,
      10,
    );
    const reads = others.reduce((n, s) => n + monthRuns(s.rateMinutes) / Math.ceil(5 / s.rateMinutes), 0) * 2;
    expect(items.get('Secrets Manager API calls')?.detail).toContain(
      `≈ ${Math.round(reads)} GetSecretValue/month`,
    );
  });
});
