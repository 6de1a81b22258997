// The plain AWS resources infra creates, built under Pulumi mocks (no engine, no AWS): their inputs are asserted
// as Pulumi would send them. SST components (Function, Vpc, Aurora, ApiGatewayV2, Cron) cannot be built here.
// Broker triggers, alarms and the dashboard; permissions, deferred ticks, migrations, secrets and outputs are in
// resources-access.test.ts.
import * as pulumi from '@pulumi/pulumi';
import { describe, expect, it } from 'vitest';
import { planDeployment } from '../../infra/plan.ts';
import { aBrokerPlan, aDeployConfig, fnArn, MQ_ARN, MQ_SECRET, MSK_ARN } from './fixtures.ts';
import { resolved, usePulumiMocks } from './pulumi-mocks.ts';

const { inputsOf } = usePulumiMocks();

describe('broker triggers', () => {
  it('delete a Kafka mapping before making its replacement, whose consumer group id is still in use until then', async () => {
    // Prepare
    const { mappingOptions } = await import('../../infra/brokers.ts');
    const plan = aBrokerPlan();
    const kinds = new Map(plan.brokerTriggers.map((trigger) => [trigger.kind, trigger]));
    // Act + Assess: a change of startingPosition (its default went to TRIM_HORIZON) or of the topics replaces the
    // mapping; made first, the new one would ask for the group id of the old
    for (const kind of ['msk', 'self-managed-kafka'] as const) {
      const trigger = kinds.get(kind);
      expect(trigger, kind).toBeDefined();
      if (trigger)
        expect(mappingOptions(trigger, { protect: false })).toEqual({
          protect: false,
          deleteBeforeReplace: true,
        });
    }
    const mq = kinds.get('amazon-mq');
    expect(mq).toBeDefined();
    if (mq) expect(mappingOptions(mq, {})).toEqual({});
  });

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
      startingPosition: 'TRIM_HORIZON',
      amazonManagedKafkaEventSourceConfig: { consumerGroupId: 'queuebox-clicks.clicks' },
      batchSize: 100,
      enabled: true,
    });
    expect(legacy).toEqual({
      functionName: fnArn('kafka-source'),
      selfManagedEventSource: { endpoints: { KAFKA_BOOTSTRAP_SERVERS: 'kafka.example.com:9096' } },
      topics: ['legacy'],
      startingPosition: 'TRIM_HORIZON',
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
    // 4 gauge alarms, new dead rows, the heartbeat, the ingest failures (an HTTP source: inbox-http exists), the
    // admin failures, the source problems (Kafka and Amazon MQ sources: source-check exists).
    expect(metricAlarms.filter((a) => a.inputs.namespace === 'QueueBox')).toHaveLength(9);
    expect(metricAlarms.find((a) => a.name === 'SourceProblemsAlarm')?.inputs).toMatchObject({
      metricName: 'SourceProblems',
      dimensions: { service: 'queuebox-prod' },
      statistic: 'Sum',
      threshold: 0,
      treatMissingData: 'notBreaching',
      alarmActions: [topicArn],
      okActions: [topicArn],
    });
    expect(metricAlarms.find((a) => a.name === 'AdminFailuresAlarm')?.inputs).toMatchObject({
      metricName: 'AdminFailures',
      dimensions: { service: 'queuebox-prod' },
      statistic: 'Sum',
      alarmActions: [topicArn],
      okActions: [topicArn],
    });
    expect(metricAlarms.find((a) => a.name === 'IngestFailuresAlarm')?.inputs).toMatchObject({
      metricName: 'IngestFailures',
      dimensions: { service: 'queuebox-prod' },
      alarmActions: [topicArn],
      okActions: [topicArn],
    });
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
    expect(widget('Inbox')?.metrics?.map((m) => m[1])).toContain('IngestFailures');
    expect(widget('Admin API failures (5xx)')?.metrics).toEqual([
      ['QueueBox', 'AdminFailures', 'service', 'queuebox-prod', { stat: 'Sum', label: 'AdminFailures' }],
    ]);
    // One line per destination that moved: a search over the counters' { service, Destination } series.
    expect(widget('Outbox by destination')?.metrics).toEqual(
      ['Retried', 'Dead', 'Sent'].map((name) => [
        {
          expression: `SEARCH('{QueueBox,Destination,service} MetricName="${name}" service="queuebox-prod"', 'Sum', 300)`,
          label: `${name} \${PROP('Dim.Destination')}`,
          id: name.toLowerCase(),
        },
      ]),
    );
    // The text says where the gauges come from as the functions do it (not "from maintenance-tick" alone).
    const text = String((body.widgets[0]?.properties as { markdown?: string } | undefined)?.markdown ?? '');
    expect(text).toContain(
      'sampled by outbox-tick (outbox; the inbox too where no relay-tick runs) and relay-tick (inbox) before every drain',
    );
    expect(text).toContain('rows that went dead in the last 5 minutes');
    expect(text).toContain('ingest failures');
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
