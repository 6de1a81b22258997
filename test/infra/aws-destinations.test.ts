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
    aws: { sources: { 'orders-in': { batchSize: 500, batchWindowSeconds: 5 } } },
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

  it('creates an SQS event source mapping with ReportBatchItemFailures per source queue', async () => {
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
          batchSize: 10,
          enabled: true,
        },
      ],
    ]);
  });
});
