// The plain AWS resources infra creates, built under Pulumi mocks (no engine, no AWS): their inputs are asserted
// as Pulumi would send them. SST components (Function, Vpc, Aurora, ApiGatewayV2, Cron) cannot be built here.
import * as pulumi from '@pulumi/pulumi';
import type { FunctionName } from '@queuebox/deploy-contract';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { collectReferences } from '../../infra/config.ts';
import { planDatabase } from '../../infra/database-plan.ts';
import { type DeployPlan, planDeployment } from '../../infra/plan.ts';
import { planSecrets } from '../../infra/secrets-plan.ts';
import {
  aConfig,
  aConfigInput,
  aDeployConfig,
  aKafkaSource,
  anAmqpSource,
  anHttpSource,
  MQ_ARN,
  MQ_SECRET,
  MSK_ARN,
} from './fixtures.ts';

interface Registered {
  readonly type: string;
  readonly name: string;
  readonly inputs: Record<string, unknown>;
}

const registered: Registered[] = [];

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource(args) {
        registered.push({ type: args.type, name: args.name, inputs: args.inputs });
        const name = typeof args.inputs.name === 'string' ? args.inputs.name : `${args.name}-generated`;
        return {
          id: `${args.name}-id`,
          state: { ...args.inputs, name, arn: `arn:aws:mock:eu-west-1:123456789012:${args.type}/${name}` },
        };
      },
      call(args) {
        return args.inputs;
      },
    },
    'queuebox',
    'test',
    false,
  );
});

beforeEach(() => {
  registered.length = 0;
});

function resolved<T>(output: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => output.apply((value) => resolve(value)));
}

/** Waits until every resource is registered, then returns the inputs of those of `type`. */
async function inputsOf(resources: readonly pulumi.CustomResource[], type: string): Promise<Registered[]> {
  await Promise.all(resources.map((r) => resolved(r.urn)));
  return registered.filter((r) => r.type === type).sort((a, b) => a.name.localeCompare(b.name));
}

const ACCOUNT = { partition: 'aws', region: 'eu-west-1', accountId: '123456789012' };
const fnArn = (fn: FunctionName) => `arn:aws:lambda:eu-west-1:123456789012:function:queuebox-prod-${fn}`;

function aBrokerPlan(): DeployPlan {
  const input = aConfigInput({
    sources: {
      stripe: anHttpSource(),
      clicks: aKafkaSource({ topics: ['clicks', 'views'] }),
      legacy: aKafkaSource({ brokers: ['kafka.example.com:9096'], topics: ['legacy'] }),
      orders: anAmqpSource(),
    },
    aws: {
      sources: {
        clicks: { mskClusterArn: MSK_ARN },
        legacy: { auth: { type: 'sasl-scram-512', secretArn: MQ_SECRET }, batchWindowSeconds: 5 },
        orders: { mqBrokerArn: MQ_ARN, auth: { type: 'basic', secretArn: MQ_SECRET } },
      },
      alarms: { email: ['ops@example.com', 'dev@example.com'] },
      // Self-managed Kafka polled from the install's private subnets: the VPC layout.
      network: { functionsInVpc: true },
    },
  });
  return planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });
}

describe('broker triggers', () => {
  it('creates one event source mapping per MSK topic, self-managed topic and Amazon MQ queue', async () => {
    // Prepare
    const { createBrokerTriggers } = await import('../../infra/brokers.ts');
    const plan = aBrokerPlan();

    // Act
    const mappings = createBrokerTriggers(plan.brokerTriggers, {
      functionArns: { 'kafka-source': fnArn('kafka-source'), 'amqp-source': fnArn('amqp-source') },
      privateSubnetIds: pulumi.output(['subnet-0a', 'subnet-0b']),
      securityGroupIds: ['sg-01'],
    });

    // Assess
    const inputs = await inputsOf(mappings, 'aws:lambda/eventSourceMapping:EventSourceMapping');
    expect(inputs.map((i) => i.name)).toEqual([
      'ClicksClicksTrigger',
      'ClicksViewsTrigger',
      'LegacyLegacyTrigger',
      'OrdersTrigger',
    ]);
    const [clicks, , legacy, orders] = inputs.map((i) => i.inputs);
    expect(clicks).toEqual({
      functionName: fnArn('kafka-source'),
      eventSourceArn: MSK_ARN,
      topics: ['clicks'],
      startingPosition: 'LATEST',
      amazonManagedKafkaEventSourceConfig: { consumerGroupId: 'queuebox-clicks.clicks' },
      batchSize: 100,
      enabled: true,
    });
    expect(legacy).toEqual({
      functionName: fnArn('kafka-source'),
      selfManagedEventSource: { endpoints: { KAFKA_BOOTSTRAP_SERVERS: 'kafka.example.com:9096' } },
      topics: ['legacy'],
      startingPosition: 'LATEST',
      selfManagedKafkaEventSourceConfig: { consumerGroupId: 'queuebox-legacy' },
      batchSize: 100,
      maximumBatchingWindowInSeconds: 5,
      enabled: true,
      sourceAccessConfigurations: [
        { type: 'SASL_SCRAM_512_AUTH', uri: MQ_SECRET },
        { type: 'VPC_SUBNET', uri: 'subnet:subnet-0a' },
        { type: 'VPC_SUBNET', uri: 'subnet:subnet-0b' },
        { type: 'VPC_SECURITY_GROUP', uri: 'security_group:sg-01' },
      ],
    });
    expect(orders).toEqual({
      functionName: fnArn('amqp-source'),
      eventSourceArn: MQ_ARN,
      queues: 'orders.in',
      batchSize: 100,
      enabled: true,
      sourceAccessConfigurations: [
        { type: 'BASIC_AUTH', uri: MQ_SECRET },
        { type: 'VIRTUAL_HOST', uri: '/' },
      ],
    });
  });

  it('creates no mapping when the configuration declares no broker source', async () => {
    // Prepare
    const { createBrokerTriggers } = await import('../../infra/brokers.ts');
    const plan = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });

    // Act
    const mappings = createBrokerTriggers(plan.brokerTriggers, {
      functionArns: {},
      privateSubnetIds: [],
      securityGroupIds: [],
    });

    // Assess
    expect(mappings).toEqual([]);
  });
});

describe('alarms', () => {
  it('creates the topic, the email subscriptions and alarms on the gauges and on function errors', async () => {
    // Prepare
    const { createAlarms } = await import('../../infra/alarms.ts');
    const plan = aBrokerPlan();
    const names = Object.fromEntries(plan.functions.map((f) => [f.name, `queuebox-prod-${f.name}`]));

    // Act
    const alarms = createAlarms(plan.alarms, names);

    // Assess
    const resources = [alarms.topic, ...alarms.subscriptions, ...alarms.alarms];
    const topic = await inputsOf(resources, 'aws:sns/topic:Topic');
    const topicArn = await resolved(alarms.topic.arn);
    expect(topic.map((t) => t.inputs.name)).toEqual(['queuebox-prod-alarms']);
    const subscriptions = await inputsOf(resources, 'aws:sns/topicSubscription:TopicSubscription');
    expect(subscriptions.map((s) => s.inputs)).toEqual([
      { topic: topicArn, protocol: 'email', endpoint: 'ops@example.com' },
      { topic: topicArn, protocol: 'email', endpoint: 'dev@example.com' },
    ]);
    const metricAlarms = await inputsOf(resources, 'aws:cloudwatch/metricAlarm:MetricAlarm');
    const deadInbox = metricAlarms.find((a) => a.name === 'DeadRowsInboxAlarm')?.inputs;
    expect(deadInbox).toEqual({
      name: 'queuebox-prod-dead-rows-inbox',
      alarmDescription: expect.stringContaining('inbox has dead rows'),
      namespace: 'QueueBox',
      metricName: 'DeadRows',
      dimensions: { service: 'queuebox-prod', Table: 'inbox' },
      statistic: 'Maximum',
      period: 300,
      evaluationPeriods: 1,
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
      treatMissingData: 'ignore',
      alarmActions: [topicArn],
      okActions: [topicArn],
    });
    const errors = metricAlarms.filter((a) => a.inputs.metricName === 'Errors');
    expect(errors.map((a) => (a.inputs.dimensions as Record<string, string>).FunctionName).sort()).toEqual(
      plan.functions
        .filter((f) => f.name !== 'migrate')
        .map((f) => `queuebox-prod-${f.name}`)
        .sort(),
    );
    expect(metricAlarms.filter((a) => a.inputs.namespace === 'QueueBox')).toHaveLength(5);
  });
});

describe('dashboard', () => {
  it('shows the gauges, the counters and every function', async () => {
    // Prepare
    const { createDashboard } = await import('../../infra/dashboard.ts');

    // Act
    const dashboard = createDashboard({
      name: 'queuebox-prod',
      region: pulumi.output('eu-west-1'),
      service: 'queuebox-prod',
      functionNames: { 'outbox-tick': pulumi.output('fn-outbox'), 'inbox-http': 'fn-inbox' },
      apiId: 'a1b2c3',
    });

    // Assess
    const [input] = await inputsOf([dashboard], 'aws:cloudwatch/dashboard:Dashboard');
    expect(input?.inputs.dashboardName).toBe('queuebox-prod');
    const body = JSON.parse(String(input?.inputs.dashboardBody)) as {
      widgets: { properties: { title?: string; region?: string; metrics?: unknown[][] } }[];
    };
    const widget = (title: string) => body.widgets.find((w) => w.properties.title === title)?.properties;
    expect(widget('Dead rows')?.metrics).toEqual([
      [
        'QueueBox',
        'DeadRows',
        'service',
        'queuebox-prod',
        'Table',
        'outbox',
        { stat: 'Maximum', label: 'outbox' },
      ],
      [
        'QueueBox',
        'DeadRows',
        'service',
        'queuebox-prod',
        'Table',
        'inbox',
        { stat: 'Maximum', label: 'inbox' },
      ],
    ]);
    expect(widget('Function errors')?.metrics).toEqual([
      ['AWS/Lambda', 'Errors', 'FunctionName', 'fn-outbox', { stat: 'Sum', label: 'outbox-tick' }],
      ['AWS/Lambda', 'Errors', 'FunctionName', 'fn-inbox', { stat: 'Sum', label: 'inbox-http' }],
    ]);
    expect(widget('API requests')?.metrics?.[0]).toEqual([
      'AWS/ApiGateway',
      'Count',
      'ApiId',
      'a1b2c3',
      { stat: 'Sum', label: 'Count' },
    ]);
    expect(
      body.widgets
        .filter((w) => w.properties.region !== undefined)
        .every((w) => w.properties.region === 'eu-west-1'),
    ).toBe(true);
  });
});

describe('function permissions', () => {
  it('grants each function its secrets, its wake-ups, its deferred ticks and its broker access', async () => {
    // Prepare
    const { createFunctionPolicies } = await import('../../infra/permissions.ts');
    const plan = aBrokerPlan();
    const roles = Object.fromEntries(plan.functions.map((f) => [f.name, `role-${f.name}`]));
    const functionArns = Object.fromEntries(plan.functions.map((f) => [f.name, fnArn(f.name)]));

    // Act
    const policies = createFunctionPolicies(plan, roles, {
      account: ACCOUNT,
      functionArns,
      managedSecretArns: [
        pulumi.output('arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/stripe-Ab12Cd'),
      ] as never,
      databaseSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/database-Zz99Yy',
      scheduleGroupName: 'queuebox-prod-ticks',
      schedulerRoleArn: 'arn:aws:iam::123456789012:role/ticks',
    });

    // Assess
    const inputs = await inputsOf(Object.values(policies), 'aws:iam/rolePolicy:RolePolicy');
    const policy = (id: string) => {
      const found = inputs.find((i) => i.name === id);
      return {
        role: found?.inputs.role,
        statements: (
          JSON.parse(String(found?.inputs.policy)) as {
            Statement: { Sid: string; Resource: string[]; Action: string[] }[];
          }
        ).Statement,
      };
    };
    expect(inputs.map((i) => i.name)).toEqual(plan.functions.map((f) => `${f.id}Policy`).sort());

    const inbox = policy('InboxHttpPolicy');
    expect(inbox.role).toBe('role-inbox-http');
    expect(inbox.statements.map((s) => s.Sid)).toEqual(['ReadConfigurationSecrets', 'WakeUp']);
    expect(inbox.statements[0]?.Resource).toEqual([
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/database-Zz99Yy',
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/stripe-Ab12Cd',
    ]);
    expect(inbox.statements[1]?.Resource).toEqual([fnArn('relay-tick')]);

    const outbox = policy('OutboxTickPolicy');
    expect(outbox.statements.map((s) => s.Sid)).toEqual([
      'ReadConfigurationSecrets',
      'BookDeferredTick',
      'PassSchedulerRole',
    ]);
    expect(outbox.statements[1]?.Resource).toEqual([
      'arn:aws:scheduler:eu-west-1:123456789012:schedule/queuebox-prod-ticks/*',
    ]);

    const relay = policy('RelayTickPolicy');
    expect(relay.statements.find((s) => s.Sid === 'WakeUp')?.Resource).toEqual([fnArn('outbox-tick')]);

    const kafka = policy('KafkaSourcePolicy');
    expect(kafka.statements.map((s) => s.Sid)).toEqual([
      'ReadConfigurationSecrets',
      'WakeUp',
      'TriggerMsk',
      'TriggerMskIam',
      'TriggerBrokerCredentials',
      'TriggerNetwork',
    ]);
    expect(kafka.statements.find((s) => s.Sid === 'TriggerMskIam')?.Resource).toEqual([
      MSK_ARN,
      'arn:aws:kafka:eu-west-1:123456789012:topic/events/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab-3/clicks',
      'arn:aws:kafka:eu-west-1:123456789012:group/events/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab-3/queuebox-clicks.clicks',
      'arn:aws:kafka:eu-west-1:123456789012:topic/events/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab-3/views',
      'arn:aws:kafka:eu-west-1:123456789012:group/events/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab-3/queuebox-clicks.views',
    ]);

    const amqp = policy('AmqpSourcePolicy');
    expect(amqp.statements.find((s) => s.Sid === 'TriggerAmazonMq')).toMatchObject({
      Action: ['mq:DescribeBroker'],
      Resource: [MQ_ARN],
    });
  });

  it('matches external secrets by name with the suffix Secrets Manager appends', async () => {
    // Prepare
    const { functionPolicyStatements } = await import('../../infra/permissions.ts');
    const input = aConfigInput({
      sources: { stripe: anHttpSource({ auth: { scheme: 'bearer', secrets: ['secret://shared/token'] } }) },
    });
    const { secrets } = planSecrets(
      collectReferences(input),
      aConfig({ aws: { secrets: { external: ['shared/token'] } } }),
      'queuebox/dev',
    );

    // Act
    const statements = functionPolicyStatements(
      'admin-http',
      { wakeups: [], deferredTicks: [], brokerTriggers: [], secrets },
      {
        account: ACCOUNT,
        functionArns: {},
        managedSecretArns: [],
        databaseSecretArn: 'queuebox/dev/database',
      },
    );

    // Assess
    expect(statements).toEqual([
      {
        Sid: 'ReadConfigurationSecrets',
        Effect: 'Allow',
        Action: ['secretsmanager:GetSecretValue'],
        Resource: [
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/dev/database-??????',
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:shared/token-??????',
        ],
      },
    ]);
  });
});

describe('deferred ticks', () => {
  it('creates the schedule group and a scheduler role that may invoke only the ticks', async () => {
    // Prepare
    const { allowSchedulerToInvoke, createDeferredTickScheduling } = await import('../../infra/wake-ups.ts');

    // Act
    const scheduling = createDeferredTickScheduling({
      groupName: 'queuebox-prod-ticks',
      accountId: '123456789012',
    });
    const policy = allowSchedulerToInvoke(scheduling.role, [
      fnArn('outbox-tick'),
      pulumi.output(fnArn('relay-tick')),
    ]);

    // Assess
    const resources = [scheduling.group, scheduling.role, policy];
    const [group] = await inputsOf(resources, 'aws:scheduler/scheduleGroup:ScheduleGroup');
    const [role] = await inputsOf(resources, 'aws:iam/role:Role');
    const [rolePolicy] = await inputsOf(resources, 'aws:iam/rolePolicy:RolePolicy');
    expect(group?.inputs).toEqual({ name: 'queuebox-prod-ticks' });
    expect(JSON.parse(String(role?.inputs.assumeRolePolicy)).Statement[0]).toEqual({
      Effect: 'Allow',
      Principal: { Service: 'scheduler.amazonaws.com' },
      Action: 'sts:AssumeRole',
      Condition: { StringEquals: { 'aws:SourceAccount': '123456789012' } },
    });
    expect(rolePolicy?.inputs.role).toBe(await resolved(scheduling.role.name));
    expect(JSON.parse(String(rolePolicy?.inputs.policy)).Statement).toEqual([
      {
        Effect: 'Allow',
        Action: ['lambda:InvokeFunction'],
        Resource: [fnArn('outbox-tick'), fnArn('relay-tick')],
      },
    ]);
  });
});

describe('migrations on deploy', () => {
  it('invokes migrate with the hash and re-runs when migrations, schema or database change', async () => {
    // Prepare
    const { createMigrationRun } = await import('../../infra/migrations.ts');
    const database = planDatabase(aConfig({ database: { schema: 'qb' } }), undefined, 'queuebox/prod');

    // Act
    const run = createMigrationRun({ functionName: 'queuebox-prod-migrate', hash: 'abc123', database });

    // Assess
    const [invocation] = await inputsOf([run], 'aws:lambda/invocation:Invocation');
    expect(invocation?.inputs).toEqual({
      functionName: 'queuebox-prod-migrate',
      input: JSON.stringify({ trigger: 'deploy', migrationsHash: 'abc123' }),
      triggers: { migrations: 'abc123', schema: 'qb', database: 'aurora:queuebox/prod/database' },
    });
  });
});

describe('secret copies', () => {
  it('copies sst.Secret values into Secrets Manager under the stage-scoped names', async () => {
    // Prepare
    const { createDatabaseUrlSecret, createSecretCopies } = await import('../../infra/secret-copies.ts');
    const input = aConfigInput({ admin: { token: 'secret://queuebox/admin' } });
    const { secrets } = planSecrets(collectReferences(input), aConfig(), 'queuebox/prod');

    // Act
    const copies = createSecretCopies(secrets.managed, {
      BillingWhsec: pulumi.secret('whsec_b'),
      QueueboxAdmin: 'admin-token',
      StripeWebhook: 'whsec_s',
    });
    const url = createDatabaseUrlSecret('queuebox/prod/database', {
      host: 'db.cluster.internal',
      port: 5432,
      username: 'postgres',
      password: pulumi.output('pw'),
      database: 'queuebox',
    });

    // Assess
    const resources = [...copies, url].flatMap((c) => [c.secret, c.version]);
    const created = await inputsOf(resources, 'aws:secretsmanager/secret:Secret');
    expect(created.map((s) => [s.name, s.inputs.name, s.inputs.recoveryWindowInDays])).toEqual([
      ['DatabaseUrl', 'queuebox/prod/database', 0],
      ['SecretCopy-billing', 'queuebox/prod/billing', 0],
      ['SecretCopy-queuebox/admin', 'queuebox/prod/queuebox/admin', 0],
      ['SecretCopy-stripe', 'queuebox/prod/stripe', 0],
    ]);
    const versions = await inputsOf(resources, 'aws:secretsmanager/secretVersion:SecretVersion');
    // Pulumi marks a secret input with its signature key; the values stay encrypted in the state.
    const text = (name: string) => versions.find((v) => v.name === name)?.inputs.secretString;
    const secret = (value: string) => ({
      [pulumi.runtime.specialSigKey]: pulumi.runtime.specialSecretSig,
      value,
    });
    expect(text('SecretCopy-billingVersion')).toEqual(secret('{"whsec":"whsec_b"}'));
    expect(text('SecretCopy-queuebox/adminVersion')).toEqual(secret('admin-token'));
    expect(text('DatabaseUrlVersion')).toEqual(
      secret('{"url":"postgres://postgres:pw@db.cluster.internal:5432/queuebox?sslmode=verify-full"}'),
    );
  });
});

describe('webhook outputs', () => {
  it('gives each HTTP source an output with its full URL', async () => {
    // Prepare
    const { webhookOutputs } = await import('../../infra/webhooks.ts');
    const plan = aBrokerPlan();

    // Act
    const outputs = webhookOutputs(
      pulumi.output('https://abc.execute-api.eu-west-1.amazonaws.com'),
      plan.webhooks,
    );

    // Assess
    expect(Object.keys(outputs)).toEqual(['webhook-stripe']);
    expect(await resolved(outputs['webhook-stripe'] as pulumi.Output<string>)).toBe(
      'https://abc.execute-api.eu-west-1.amazonaws.com/inbox/stripe',
    );
  });
});
