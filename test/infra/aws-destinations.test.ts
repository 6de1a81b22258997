// IAM and event source mappings of the AWS-native destinations (SQS, SNS, EventBridge) and SQS sources, built
// under Pulumi mocks: outbox-tick gets exactly one publish action per service on exactly the configured ARNs, no
// other function gets any; sqs-source gets the polling actions on its queues and an SQS mapping with
// ReportBatchItemFailures.
import { ConfigError } from '@queuebox/core';
import type { FunctionName } from '@queuebox/deploy-contract';
import { describe, expect, it } from 'vitest';
import { type DeployPlan, planDeployment } from '../../infra/plan.ts';
import { aConfigInput, aDeployConfig, anHttpSource } from './fixtures.ts';
import { usePulumiMocks } from './pulumi-mocks.ts';

const { inputsOf } = usePulumiMocks();

const ACCOUNT = { partition: 'aws', region: 'eu-west-1', accountId: '123456789012' };
const fnArn = (fn: FunctionName) => `arn:aws:lambda:eu-west-1:123456789012:function:queuebox-prod-${fn}`;
const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders-out';
const FIFO_QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/ledger.fifo';
const IN_QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders-in';
const IN_FIFO = 'https://sqs.eu-west-1.amazonaws.com/123456789012/payments-in.fifo';
const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:order-events';
const PARTNER_BUS = 'arn:aws:events:eu-west-1:210987654321:event-bus/partner';

function anAwsPlan(overrides: Record<string, unknown> = {}): DeployPlan {
  const input = aConfigInput({
    sources: {
      stripe: anHttpSource(),
      'orders-in': { type: 'sqs', queueUrl: IN_QUEUE },
      'payments-in': { type: 'sqs', queueUrl: IN_FIFO },
    },
    destinations: {
      queue: { type: 'sqs', queueUrl: QUEUE },
      ledger: { type: 'sqs', queueUrl: FIFO_QUEUE },
      fanout: { type: 'sns', topicArn: TOPIC },
      events: { type: 'eventbridge', source: 'com.example.orders' },
      partner: { type: 'eventbridge', source: 'com.example.orders', eventBus: PARTNER_BUS },
      twice: { type: 'sqs', queueUrl: QUEUE },
    },
    routes: [{ match: '#', destination: 'queue' }],
    aws: { sources: { 'orders-in': { batchSize: 500, batchWindowSeconds: 5, maximumConcurrency: 50 } } },
    ...overrides,
  });
  return planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });
}

describe('AWS destinations and SQS sources in the plan', () => {
  it('plans sqs-source, publish targets and one SQS mapping per source queue', () => {
    // Act
    const plan = anAwsPlan();
    // Assess
    expect(plan.functions.map((f) => f.name)).toContain('sqs-source');
    expect(plan.publishTargets.map((t) => [t.destination, t.action])).toEqual([
      ['queue', 'sqs:SendMessage'],
      ['ledger', 'sqs:SendMessage'],
      ['fanout', 'sns:Publish'],
      ['events', 'events:PutEvents'],
      ['partner', 'events:PutEvents'],
      ['twice', 'sqs:SendMessage'],
    ]);
    expect(
      plan.brokerTriggers.map((t) => (t.kind === 'sqs' ? [t.source, t.queueArn, t.batchSize] : [])),
    ).toEqual([
      ['orders-in', 'arn:aws:sqs:eu-west-1:123456789012:orders-in', 500],
      ['payments-in', 'arn:aws:sqs:eu-west-1:123456789012:payments-in.fifo', 10],
    ]);
  });

  it('refuses a destination with an endpoint and a source queue that is not on AWS', () => {
    // Act
    const attempt = () =>
      anAwsPlan({
        sources: { local: { type: 'sqs', queueUrl: 'http://127.0.0.1:9324/000000000000/orders' } },
        destinations: { local: { type: 'sns', topicArn: TOPIC, endpoint: 'http://127.0.0.1:4566' } },
        routes: [],
        aws: {},
      });
    // Assess
    expect(attempt).toThrow(ConfigError);
    try {
      attempt();
    } catch (error) {
      expect((error as ConfigError).issues.map((i) => i.path).sort()).toEqual([
        'destinations.local.endpoint',
        'sources.local.queueUrl',
      ]);
    }
  });
});

describe('AWS destination and SQS source permissions', () => {
  it('grants outbox-tick exactly the publish actions on the configured ARNs, and sqs-source its queues', async () => {
    // Prepare
    const { createFunctionPolicies } = await import('../../infra/permissions.ts');
    const plan = anAwsPlan();
    const roles = Object.fromEntries(plan.functions.map((f) => [f.name, `role-${f.name}`]));
    const functionArns = Object.fromEntries(plan.functions.map((f) => [f.name, fnArn(f.name)]));

    // Act
    const policies = createFunctionPolicies(plan, roles, {
      account: ACCOUNT,
      functionArns,
      managedSecretArns: [],
      databaseSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/database-Zz99Yy',
    });

    // Assess
    const inputs = await inputsOf(Object.values(policies), 'aws:iam/rolePolicy:RolePolicy');
    const statementsOf = (id: string) =>
      (
        JSON.parse(String(inputs.find((i) => i.name === id)?.inputs.policy)) as {
          Statement: { Sid: string; Resource: string[]; Action: string[] }[];
        }
      ).Statement;
    const outbox = statementsOf('OutboxTickPolicy').filter((s) => s.Sid !== 'ReadConfigurationSecrets');
    expect(outbox).toEqual([
      {
        Sid: 'PublishSqs',
        Effect: 'Allow',
        Action: ['sqs:SendMessage'],
        Resource: [
          'arn:aws:sqs:eu-west-1:123456789012:orders-out',
          'arn:aws:sqs:eu-west-1:123456789012:ledger.fifo',
        ],
      },
      { Sid: 'PublishSns', Effect: 'Allow', Action: ['sns:Publish'], Resource: [TOPIC] },
      {
        Sid: 'PutEvents',
        Effect: 'Allow',
        Action: ['events:PutEvents'],
        Resource: ['arn:aws:events:eu-west-1:123456789012:event-bus/default', PARTNER_BUS],
      },
    ]);
    const publishActions = /^(sqs:SendMessage|sns:Publish|events:PutEvents)$/;
    for (const fn of plan.functions.filter((f) => f.name !== 'outbox-tick')) {
      const actions = statementsOf(`${fn.id}Policy`).flatMap((s) => s.Action);
      expect(
        actions.filter((a) => publishActions.test(a)),
        fn.name,
      ).toEqual([]);
    }
    const sqsSource = statementsOf('SqsSourcePolicy');
    expect(sqsSource.map((s) => s.Sid)).toEqual(['ReadConfigurationSecrets', 'WakeUp', 'TriggerSqs']);
    expect(sqsSource[2]).toEqual({
      Sid: 'TriggerSqs',
      Effect: 'Allow',
      Action: [
        'sqs:ReceiveMessage',
        'sqs:DeleteMessage',
        'sqs:ChangeMessageVisibility',
        'sqs:GetQueueAttributes',
      ],
      Resource: [
        'arn:aws:sqs:eu-west-1:123456789012:orders-in',
        'arn:aws:sqs:eu-west-1:123456789012:payments-in.fifo',
      ],
    });
  });

  it("grants PutEvents on a bus named with its destination's region in that region, where the publisher sends", async () => {
    // Prepare: the install runs in eu-west-1; the destination's publisher sends to us-east-1 (its `region`).
    const { createFunctionPolicies } = await import('../../infra/permissions.ts');
    const plan = anAwsPlan({
      destinations: {
        useast: {
          type: 'eventbridge',
          source: 'com.example.orders',
          eventBus: 'orders',
          region: 'us-east-1',
        },
        local: { type: 'eventbridge', source: 'com.example.orders', eventBus: 'orders' },
      },
      routes: [],
    });

    // Act
    const policies = createFunctionPolicies(
      plan,
      { 'outbox-tick': 'role-outbox-tick' },
      {
        account: ACCOUNT,
        functionArns: {},
        managedSecretArns: [],
        databaseSecretArn:
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/database-Zz99Yy',
      },
    );

    // Assess
    expect(plan.publishTargets).toEqual([
      expect.objectContaining({ destination: 'useast', eventBus: 'orders', region: 'us-east-1' }),
      expect.not.objectContaining({ region: expect.anything() }),
    ]);
    const [outbox] = await inputsOf(Object.values(policies), 'aws:iam/rolePolicy:RolePolicy');
    const statements = (JSON.parse(String(outbox?.inputs.policy)) as { Statement: { Sid: string }[] })
      .Statement;
    expect(statements.find((s) => s.Sid === 'PutEvents')).toEqual({
      Sid: 'PutEvents',
      Effect: 'Allow',
      Action: ['events:PutEvents'],
      Resource: [
        'arn:aws:events:us-east-1:123456789012:event-bus/orders',
        'arn:aws:events:eu-west-1:123456789012:event-bus/orders',
      ],
    });
  });

  it('creates an SQS event source mapping with ReportBatchItemFailures and a maximum concurrency per source queue', async () => {
    // Prepare
    const { createBrokerTriggers } = await import('../../infra/brokers.ts');
    const plan = anAwsPlan();

    // Act
    const mappings = createBrokerTriggers(plan.brokerTriggers, {
      functionArns: { 'sqs-source': fnArn('sqs-source') },
      privateSubnetIds: [],
      securityGroupIds: [],
    });

    // Assess
    const inputs = await inputsOf(mappings, 'aws:lambda/eventSourceMapping:EventSourceMapping');
    expect(inputs.map((i) => [i.name, i.inputs])).toEqual([
      [
        'OrdersInTrigger',
        {
          functionName: fnArn('sqs-source'),
          eventSourceArn: 'arn:aws:sqs:eu-west-1:123456789012:orders-in',
          functionResponseTypes: ['ReportBatchItemFailures'],
          scalingConfig: { maximumConcurrency: 50 },
          batchSize: 500,
          maximumBatchingWindowInSeconds: 5,
          enabled: true,
        },
      ],
      [
        'PaymentsInTrigger',
        {
          functionName: fnArn('sqs-source'),
          eventSourceArn: 'arn:aws:sqs:eu-west-1:123456789012:payments-in.fifo',
          functionResponseTypes: ['ReportBatchItemFailures'],
          // Not configured: the default cap (10 instances, 20 database connections).
          scalingConfig: { maximumConcurrency: 10 },
          batchSize: 10,
          enabled: true,
        },
      ],
    ]);
  });
});

describe('queues and topics under a customer-managed KMS key, and the SQS mappings’ concurrency', () => {
  const SOURCE_KEY = 'arn:aws:kms:eu-west-1:123456789012:key/1111aaaa-22bb-33cc-44dd-555555eeeeee';
  const QUEUE_KEY = 'arn:aws:kms:eu-west-1:123456789012:key/mrk-0123456789abcdef0123456789abcdef';
  const US_QUEUE_KEY = 'arn:aws:kms:us-east-1:123456789012:key/9999aaaa-22bb-33cc-44dd-555555eeeeee';
  const TOPIC_KEY = 'arn:aws:kms:eu-west-1:123456789012:key/2222aaaa-22bb-33cc-44dd-555555eeeeee';
  const US_QUEUE = 'https://sqs.us-east-1.amazonaws.com/123456789012/audit-out';

  function anEncryptedPlan(): DeployPlan {
    return anAwsPlan({
      destinations: {
        queue: { type: 'sqs', queueUrl: QUEUE },
        audit: { type: 'sqs', queueUrl: US_QUEUE },
        plain: { type: 'sqs', queueUrl: FIFO_QUEUE },
        fanout: { type: 'sns', topicArn: TOPIC },
        events: { type: 'eventbridge', source: 'com.example.orders' },
      },
      routes: [{ match: '#', destination: 'queue' }],
      aws: {
        sources: { 'orders-in': { queueKmsKeyArn: SOURCE_KEY } },
        destinations: {
          queue: { kmsKeyArn: QUEUE_KEY },
          audit: { kmsKeyArn: US_QUEUE_KEY },
          fanout: { kmsKeyArn: TOPIC_KEY },
        },
      },
    });
  }

  async function kmsStatementsOf(plan: DeployPlan) {
    const { createFunctionPolicies } = await import('../../infra/permissions.ts');
    const policies = createFunctionPolicies(
      plan,
      Object.fromEntries(plan.functions.map((f) => [f.name, `role-${f.name}`])),
      {
        account: ACCOUNT,
        functionArns: Object.fromEntries(plan.functions.map((f) => [f.name, fnArn(f.name)])),
        managedSecretArns: [],
        databaseSecretArn:
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/database-Zz99Yy',
      },
    );
    const inputs = await inputsOf(Object.values(policies), 'aws:iam/rolePolicy:RolePolicy');
    return inputs.flatMap((i) =>
      (
        JSON.parse(String(i.inputs.policy)) as {
          Statement: { Sid: string; Action: string[]; Resource: string[]; Condition?: unknown }[];
        }
      ).Statement.filter((st) => st.Action.some((a) => a.startsWith('kms:'))).map((st) => ({
        policy: i.name,
        ...st,
      })),
    );
  }

  it('grants sqs-source only kms:Decrypt on its queues’ keys and outbox-tick GenerateDataKey + Decrypt on its destinations’ keys, each through its service', async () => {
    // Act
    const statements = await kmsStatementsOf(anEncryptedPlan());

    // Assess: every KMS permission of every function, nothing else
    expect(statements).toEqual([
      {
        policy: 'OutboxTickPolicy',
        Sid: 'PublishSqsKey',
        Effect: 'Allow',
        Action: ['kms:GenerateDataKey', 'kms:Decrypt'],
        Resource: [QUEUE_KEY, US_QUEUE_KEY],
        // The queue in us-east-1 is reached through SQS there.
        Condition: {
          StringEquals: { 'kms:ViaService': ['sqs.eu-west-1.amazonaws.com', 'sqs.us-east-1.amazonaws.com'] },
        },
      },
      {
        policy: 'OutboxTickPolicy',
        Sid: 'PublishSnsKey',
        Effect: 'Allow',
        Action: ['kms:GenerateDataKey', 'kms:Decrypt'],
        Resource: [TOPIC_KEY],
        Condition: { StringEquals: { 'kms:ViaService': 'sns.eu-west-1.amazonaws.com' } },
      },
      {
        policy: 'SqsSourcePolicy',
        Sid: 'TriggerSqsKey',
        Effect: 'Allow',
        Action: ['kms:Decrypt'],
        // payments-in has no key: nothing is granted for it.
        Resource: [SOURCE_KEY],
        Condition: { StringEquals: { 'kms:ViaService': 'sqs.eu-west-1.amazonaws.com' } },
      },
    ]);
  });

  it('grants no KMS action for queues and topics without a configured key', async () => {
    // Act
    const statements = await kmsStatementsOf(anAwsPlan());

    // Assess
    expect(statements).toEqual([]);
  });

  it('refuses key settings for a destination that does not exist or is not sqs or sns, and SQS settings on a broker source', () => {
    // Act
    const attempt = () =>
      anAwsPlan({
        sources: {
          'orders-in': { type: 'sqs', queueUrl: IN_QUEUE },
          clicks: { type: 'kafka', brokers: ['b-1.kafka.internal:9092'], topics: ['clicks'] },
        },
        destinations: {
          queue: { type: 'sqs', queueUrl: QUEUE },
          events: { type: 'eventbridge', source: 'com.example.orders' },
          hook: { type: 'http', url: 'https://billing.example/hooks' },
        },
        routes: [],
        aws: {
          sources: { clicks: { maximumConcurrency: 5, queueKmsKeyArn: SOURCE_KEY } },
          destinations: {
            ghost: { kmsKeyArn: QUEUE_KEY },
            events: { kmsKeyArn: QUEUE_KEY },
            hook: { kmsKeyArn: QUEUE_KEY },
            queue: { kmsKeyArn: QUEUE_KEY },
          },
        },
      });

    // Assess
    expect(attempt).toThrow(ConfigError);
    try {
      attempt();
    } catch (error) {
      expect((error as ConfigError).issues.map((i) => [i.path, i.message])).toEqual(
        expect.arrayContaining([
          ['aws.destinations.ghost', 'names no configured destination'],
          [
            'aws.destinations.events.kmsKeyArn',
            expect.stringMatching(/^is for sqs and sns .* is eventbridge$/),
          ],
          ['aws.destinations.hook.kmsKeyArn', expect.stringMatching(/this destination is http$/)],
          ['aws.sources.clicks.maximumConcurrency', expect.stringMatching(/^is for SQS sources.*kafka$/)],
          ['aws.sources.clicks.queueKmsKeyArn', expect.stringMatching(/auth\.kmsKeyArn/)],
        ]),
      );
      expect((error as ConfigError).issues).toHaveLength(5);
    }
  });
});

describe('Kafka destinations on MSK IAM', () => {
  const CLUSTER =
    'arn:aws:kafka:eu-west-1:123456789012:cluster/events/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-3';
  const OTHER = 'arn:aws:kafka:eu-west-1:123456789012:cluster/audit/11112222-3333-4444-5555-666677778888-1';
  const BROKERS = ['b-1.events.abc123.c3.kafka.eu-west-1.amazonaws.com:9098'];
  const mskDestination = (overrides: Record<string, unknown> = {}) => ({
    type: 'kafka',
    brokers: BROKERS,
    ssl: true,
    sasl: { mechanism: 'aws' },
    ...overrides,
  });
  const existingNetwork = {
    existing: { privateSubnetIds: ['subnet-0a1b2c3d', 'subnet-0e1f2a3b'], securityGroupIds: ['sg-0a1b2c3d'] },
  };

  async function statementsOf(plan: DeployPlan) {
    const { createFunctionPolicies } = await import('../../infra/permissions.ts');
    const roles = Object.fromEntries(plan.functions.map((f) => [f.name, `role-${f.name}`]));
    const policies = createFunctionPolicies(plan, roles, {
      account: ACCOUNT,
      functionArns: Object.fromEntries(plan.functions.map((f) => [f.name, fnArn(f.name)])),
      managedSecretArns: [],
      databaseSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/database-Zz99Yy',
    });
    const inputs = await inputsOf(Object.values(policies), 'aws:iam/rolePolicy:RolePolicy');
    return (id: string) =>
      (
        JSON.parse(String(inputs.find((i) => i.name === id)?.inputs.policy)) as {
          Statement: { Sid: string; Resource: string[]; Action: string[] }[];
        }
      ).Statement;
  }

  it('grants outbox-tick an idempotent producer’s actions on the cluster and the topics its template can render, and no other function any', async () => {
    // Prepare: one destination per topic template shape; one lets the broker create topics; one is not on MSK IAM.
    const plan = anAwsPlan({
      destinations: {
        events: mskDestination(),
        orders: mskDestination({ topic: 'orders.{{ topic }}.{{key}}', allowAutoTopicCreation: true }),
        audit: mskDestination({
          brokers: ['b-1.audit.def456.c3.kafka.eu-west-1.amazonaws.com:9098'],
          topic: 'audit-log',
        }),
        scram: {
          type: 'kafka',
          brokers: BROKERS,
          ssl: true,
          sasl: { mechanism: 'scram-sha-512', username: 'u', password: 'a-long-enough-password' },
        },
      },
      routes: [],
      aws: {
        network: existingNetwork,
        destinations: {
          events: { mskClusterArn: CLUSTER },
          orders: { mskClusterArn: CLUSTER },
          audit: { mskClusterArn: OTHER },
        },
      },
    });

    // Act
    const statementsFor = await statementsOf(plan);

    // Assess
    const topics = 'arn:aws:kafka:eu-west-1:123456789012:topic/events/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-3';
    const outbox = statementsFor('OutboxTickPolicy').filter((s) => s.Sid.startsWith('PublishMsk'));
    expect(outbox).toEqual([
      {
        Sid: 'PublishMskCluster',
        Effect: 'Allow',
        Action: ['kafka-cluster:Connect', 'kafka-cluster:WriteDataIdempotently'],
        Resource: [CLUSTER, OTHER],
      },
      {
        Sid: 'PublishMskTopics',
        Effect: 'Allow',
        Action: ['kafka-cluster:DescribeTopic', 'kafka-cluster:WriteData'],
        Resource: [
          `${topics}/*`,
          `${topics}/orders.*.*`,
          'arn:aws:kafka:eu-west-1:123456789012:topic/audit/11112222-3333-4444-5555-666677778888-1/audit-log',
        ],
      },
      {
        Sid: 'PublishMskCreateTopics',
        Effect: 'Allow',
        Action: ['kafka-cluster:CreateTopic'],
        Resource: [`${topics}/orders.*.*`],
      },
    ]);
    expect(plan.warnings.filter((w) => w.includes('MSK'))).toEqual([]);
    for (const fn of plan.functions.filter((f) => f.name !== 'outbox-tick')) {
      const actions = statementsFor(`${fn.id}Policy`).flatMap((s) => s.Action);
      expect(
        actions.filter((a) => a.startsWith('kafka-cluster:')),
        fn.name,
      ).toEqual([]);
    }
  });

  it('grants no CreateTopic when no destination lets the broker create topics', async () => {
    // Act
    const statementsFor = await statementsOf(
      anAwsPlan({
        destinations: { events: mskDestination() },
        routes: [],
        aws: { network: existingNetwork, destinations: { events: { mskClusterArn: CLUSTER } } },
      }),
    );

    // Assess
    expect(statementsFor('OutboxTickPolicy').map((s) => s.Sid)).toEqual([
      'ReadConfigurationSecrets',
      'PublishMskCluster',
      'PublishMskTopics',
    ]);
  });

  it('refuses an MSK IAM destination without its cluster, and a cluster on a destination that does not sign in with MSK IAM', () => {
    // Act
    const attempt = () =>
      anAwsPlan({
        destinations: {
          events: mskDestination(),
          scram: {
            type: 'kafka',
            brokers: BROKERS,
            ssl: true,
            sasl: { mechanism: 'scram-sha-512', username: 'u', password: 'a-long-enough-password' },
          },
          queue: { type: 'sqs', queueUrl: QUEUE },
        },
        routes: [],
        aws: { destinations: { scram: { mskClusterArn: CLUSTER }, queue: { mskClusterArn: CLUSTER } } },
      });

    // Assess
    expect(attempt).toThrow(ConfigError);
    try {
      attempt();
    } catch (error) {
      expect((error as ConfigError).issues.map((i) => [i.path, i.message])).toEqual([
        [
          'aws.destinations.scram.mskClusterArn',
          expect.stringMatching(/this destination is kafka without it$/),
        ],
        ['aws.destinations.queue.mskClusterArn', expect.stringMatching(/this destination is sqs$/)],
        [
          'aws.destinations.events.mskClusterArn',
          expect.stringMatching(/^is required: .*kafka-cluster:Connect.*denies every publish$/),
        ],
      ]);
    }
  });

  it.each([
    ['a topic’s, with its name', 'arn:aws:kafka:eu-west-1:123456789012:topic/events/0f1e2d3c-4b5a/orders'],
    ['a topic’s, as long as a cluster’s', 'arn:aws:kafka:eu-west-1:123456789012:topic/events/0f1e2d3c-4b5a'],
    ['a cluster’s without its uuid', 'arn:aws:kafka:eu-west-1:123456789012:cluster/events'],
  ])('refuses a cluster ARN that is %s', (_what, arn) => {
    // Act
    const attempt = () =>
      anAwsPlan({
        destinations: { events: mskDestination() },
        routes: [],
        aws: { destinations: { events: { mskClusterArn: arn } } },
      });

    // Assess
    expect(attempt).toThrow(/mskClusterArn.*must be the ARN of an MSK cluster/s);
  });

  it('warns that functions outside the cluster’s VPC reach it only through public access', () => {
    // Act
    const outside = anAwsPlan({
      destinations: { events: mskDestination() },
      routes: [],
      aws: { destinations: { events: { mskClusterArn: CLUSTER } } },
    });
    const created = anAwsPlan({
      destinations: { events: mskDestination() },
      routes: [],
      aws: { network: { functionsInVpc: true }, destinations: { events: { mskClusterArn: CLUSTER } } },
    });

    // Assess
    expect(outside.warnings.filter((w) => w.includes('MSK'))).toEqual([
      expect.stringMatching(/^destinations\.events: outbox-tick runs outside any VPC, .*public access/),
    ]);
    expect(created.warnings.filter((w) => w.includes('MSK'))).toEqual([
      expect.stringMatching(
        /^destinations\.events: outbox-tick runs in a VPC infra creates, .*aws\.network\.existing/,
      ),
    ]);
  });
});
