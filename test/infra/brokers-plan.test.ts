import { describe, expect, it } from 'vitest';
import {
  fitSqsConcurrency,
  planBrokerTriggers,
  SQS_DEFAULT_MAXIMUM_CONCURRENCY,
} from '../../infra/brokers-plan.ts';
import { aConfig, aKafkaSource, anAmqpSource, anSqsSource, MQ_ARN, MQ_SECRET, MSK_ARN } from './fixtures.ts';

describe('planBrokerTriggers', () => {
  it('maps each topic of an MSK source to its own trigger with its own consumer group', () => {
    // Prepare
    const config = aConfig({
      sources: { clicks: aKafkaSource({ topics: ['clicks', 'views'], groupId: 'qb' }) },
      aws: { sources: { clicks: { mskClusterArn: MSK_ARN, startingPosition: 'TRIM_HORIZON' } } },
    });

    // Act
    const { triggers, issues } = planBrokerTriggers(config);

    // Assess
    expect(issues).toEqual([]);
    expect(triggers).toEqual([
      expect.objectContaining({
        kind: 'msk',
        id: 'ClicksClicksTrigger',
        clusterArn: MSK_ARN,
        topic: 'clicks',
        consumerGroupId: 'qb.clicks',
        startingPosition: 'TRIM_HORIZON',
        auth: { type: 'iam' },
      }),
      expect.objectContaining({ kind: 'msk', topic: 'views', consumerGroupId: 'qb.views' }),
    ]);
  });

  it('uses the source brokers for self-managed Kafka and keeps a single-topic group id as configured', () => {
    // Act
    const { triggers, issues } = planBrokerTriggers(aConfig({ sources: { clicks: aKafkaSource() } }));

    // Assess
    expect(issues).toEqual([]);
    expect(triggers).toEqual([
      expect.objectContaining({
        kind: 'self-managed-kafka',
        bootstrapServers: ['b-1.kafka.internal:9092'],
        consumerGroupId: 'queuebox-clicks',
        inVpc: true,
        auth: { type: 'none' },
      }),
    ]);
  });

  it('creates an Amazon MQ trigger with basic auth and the virtual host', () => {
    // Prepare
    const config = aConfig({
      sources: { orders: anAmqpSource({ url: 'amqps://mq.internal:5671/shop' }) },
      aws: {
        sources: {
          orders: { mqBrokerArn: MQ_ARN, auth: { type: 'basic', secretArn: MQ_SECRET }, virtualHost: 'shop' },
        },
      },
    });

    // Act
    const { triggers, issues } = planBrokerTriggers(config);

    // Assess
    expect(issues).toEqual([]);
    expect(triggers).toEqual([
      expect.objectContaining({
        kind: 'amazon-mq',
        function: 'amqp-source',
        brokerArn: MQ_ARN,
        queue: 'orders.in',
        virtualHost: 'shop',
        auth: { type: 'basic', secretArn: MQ_SECRET },
      }),
    ]);
  });

  it("consumes the virtual host the source's url names unless one is given, and refuses two that differ", () => {
    const mq = { mqBrokerArn: MQ_ARN, auth: { type: 'basic', secretArn: MQ_SECRET } };
    const plan = (url: string, virtualHost?: string) =>
      planBrokerTriggers(
        aConfig({
          sources: { orders: anAmqpSource({ url }) },
          aws: { sources: { orders: { ...mq, ...(virtualHost === undefined ? {} : { virtualHost }) } } },
        }),
      );
    const vhostOf = (url: string, virtualHost?: string) => {
      const { triggers, issues } = plan(url, virtualHost);
      expect(issues).toEqual([]);
      return (triggers[0] as { virtualHost?: string } | undefined)?.virtualHost;
    };

    expect(vhostOf('amqps://user:pw@mq.internal:5671/shop')).toBe('shop');
    expect(vhostOf('amqps://mq.internal:5671/%2F')).toBe('/');
    expect(vhostOf('amqps://mq.internal:5671')).toBe('/');
    expect(vhostOf('amqps://mq.internal:5671/')).toBe('/');
    // A secret:// url is a stand-in at deploy time: the given virtual host, else /.
    expect(vhostOf('amqp://secret.invalid', 'shop')).toBe('shop');
    expect(vhostOf('amqp://secret.invalid')).toBe('/');
    const { triggers, issues } = plan('amqps://mq.internal:5671/shop', '/');
    expect(triggers).toEqual([]);
    expect(issues).toEqual([
      {
        path: 'aws.sources.orders.virtualHost',
        message: expect.stringContaining('sources.orders.url names the virtual host "shop"'),
      },
    ]);
  });

  it('reports what a deployment cannot satisfy instead of dropping the source', () => {
    // Prepare
    const config = aConfig({
      sources: {
        orders: anAmqpSource(),
        clicks: aKafkaSource(),
        again: aKafkaSource(),
        other: anAmqpSource({ queue: 'q2' }),
      },
      aws: {
        sources: {
          clicks: { auth: { type: 'iam' } },
          other: { mqBrokerArn: MQ_ARN },
          ghost: { batchSize: 10 },
        },
      },
    });

    // Act
    const { issues } = planBrokerTriggers(config);

    // Assess
    expect(issues.map((i) => i.path).sort()).toEqual([
      'aws.sources.clicks.auth.type',
      'aws.sources.ghost',
      'aws.sources.orders.mqBrokerArn',
      'aws.sources.other.auth.secretArn',
      'sources.again.topics',
    ]);
    expect(issues.find((i) => i.path === 'aws.sources.orders.mqBrokerArn')?.message).toMatch(
      /only from Amazon MQ/,
    );
  });

  it('refuses a batching window on a FIFO queue, which Lambda does not support, and keeps it on a standard one', () => {
    // Prepare
    const FIFO_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/payments-in.fifo';
    const config = aConfig({
      sources: { payments: anSqsSource({ queueUrl: FIFO_URL }), jobs: anSqsSource() },
      aws: { sources: { payments: { batchWindowSeconds: 5 }, jobs: { batchWindowSeconds: 5 } } },
    });

    // Act
    const { triggers, issues } = planBrokerTriggers(config);

    // Assess
    expect(issues).toEqual([
      {
        path: 'aws.sources.payments.batchWindowSeconds',
        message: expect.stringMatching(/FIFO queue and Lambda supports no batching window.*set it to 0/),
      },
    ]);
    expect(triggers.map((t) => [t.source, t.batchWindowSeconds])).toEqual([['jobs', 5]]);
  });

  it('caps each SQS mapping at 10 instances unless configured, and carries the queue key', () => {
    // Prepare
    const KEY = 'arn:aws:kms:eu-west-1:123456789012:key/1111aaaa-22bb-33cc-44dd-555555eeeeee';
    const config = aConfig({
      sources: {
        jobs: anSqsSource(),
        bulk: anSqsSource({ queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/bulk' }),
      },
      aws: { sources: { bulk: { maximumConcurrency: 1000, queueKmsKeyArn: KEY } } },
    });

    // Act
    const { triggers, issues } = planBrokerTriggers(config);

    // Assess
    expect(issues).toEqual([]);
    expect(
      triggers.map((t) => (t.kind === 'sqs' ? [t.source, t.maximumConcurrency, t.queueKmsKeyArn] : [])),
    ).toEqual([
      ['jobs', SQS_DEFAULT_MAXIMUM_CONCURRENCY, undefined],
      ['bulk', 1000, KEY],
    ]);
    expect(SQS_DEFAULT_MAXIMUM_CONCURRENCY).toBe(10);
  });

  it("fits the default caps into sqs-source's reservation and refuses a reservation the mappings exceed", () => {
    // Prepare
    const sources = {
      a: anSqsSource({ queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/a' }),
      b: anSqsSource({ queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/b' }),
    };
    const plan = (reservedConcurrency: number | false, own: Record<string, unknown> = {}) =>
      planBrokerTriggers(
        aConfig({ sources, aws: { functions: { sqsSource: { reservedConcurrency } }, sources: own } }),
      );
    const caps = (result: ReturnType<typeof planBrokerTriggers>) =>
      result.triggers.map((t) => (t.kind === 'sqs' ? t.maximumConcurrency : 0));

    // Act
    const shared = plan(12);
    const rest = plan(12, { a: { maximumConcurrency: 8 } });
    const roomy = plan(100);
    const unreserved = plan(false);
    const tooFewForDefaults = plan(3);
    const tooFewForConfigured = plan(20, { a: { maximumConcurrency: 15 }, b: { maximumConcurrency: 6 } });

    // Assess
    expect([shared.issues, caps(shared)]).toEqual([[], [6, 6]]);
    expect([rest.issues, caps(rest)]).toEqual([[], [8, 4]]);
    expect([roomy.issues, caps(roomy)]).toEqual([[], [10, 10]]);
    expect([unreserved.issues, caps(unreserved)]).toEqual([[], [10, 10]]);
    for (const [result, needed] of [
      [tooFewForDefaults, 4],
      [tooFewForConfigured, 21],
    ] as const) {
      expect(result.issues).toEqual([
        {
          path: 'aws.functions.sqsSource.reservedConcurrency',
          message: expect.stringContaining(`2 SQS mapping(s) need at least ${needed}`),
        },
      ]);
    }
  });

  it('fitSqsConcurrency: an exact fit passes, one instance short is a problem', () => {
    expect(fitSqsConcurrency([undefined, 5], 7)).toEqual({ values: [2, 5] });
    expect(fitSqsConcurrency([undefined, 5], 6).problem).toMatch(/need at least 7/);
    expect(fitSqsConcurrency([3, 5], 8)).toEqual({ values: [3, 5] });
    expect(fitSqsConcurrency([3, 5], 7).problem).toMatch(/need at least 8/);
  });

  it('creates nothing for configurations without broker sources', () => {
    expect(planBrokerTriggers(aConfig())).toEqual({ triggers: [], issues: [] });
  });
});
