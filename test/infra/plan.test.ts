import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { planDeployment } from '../../infra/plan.ts';
import { aConfigInput, aDeployConfig, anAmqpSource, anHttpSource, anSqsSource } from './fixtures.ts';

describe('planDeployment', () => {
  it('plans a whole install and gives every function the shipped configuration and Powertools settings', () => {
    // Prepare
    const loaded = aDeployConfig(aConfigInput({ logLevel: 'debug' }));

    // Act
    const plan = planDeployment(loaded, { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    expect(plan.service).toBe('queuebox-prod');
    expect(plan.environment).toEqual({
      QUEUEBOX_CONFIG: '/var/task/queuebox.yaml',
      POWERTOOLS_SERVICE_NAME: 'queuebox-prod',
      POWERTOOLS_METRICS_NAMESPACE: 'QueueBox',
      POWERTOOLS_LOG_LEVEL: 'DEBUG',
      NODE_EXTRA_CA_CERTS: '/var/runtime/ca-cert.pem',
    });
    expect(plan.deferredTicks).toEqual(['outbox-tick', 'relay-tick', 'maintenance-tick']);
    expect(plan.webhooks.map((w) => w.output)).toEqual(['webhook-stripe']);
    expect(plan.functionConfig).toContain('secret://queuebox/prod/stripe#webhook');
    // The default safety ticks (6 h) and maintenance (daily) let Aurora pause; the only warning is that nobody
    // receives the alarms of this production stage (aws.alarms.email defaults to []).
    expect(plan.warnings).toEqual([
      expect.stringMatching(/^aws\.alarms\.email is empty: the alarms of stage "prod"/),
    ]);
  });

  it("watches the age of each enabled SQS source's queue with an alarm, and prices it", () => {
    // Prepare: one source whose mapping is created disabled
    const queue = (name: string) => `https://sqs.eu-west-1.amazonaws.com/123456789012/${name}`;
    const input = aConfigInput({
      sources: {
        jobs: anSqsSource({ queueUrl: queue('jobs-in') }),
        later: anSqsSource({ queueUrl: queue('later') }),
      },
      routes: [],
      aws: { sources: { later: { enabled: false } } },
    });
    const without = planDeployment(aDeployConfig(aConfigInput({ routes: [] })), {
      app: 'queuebox',
      stage: 'prod',
      env: {},
    });

    // Act
    const plan = planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    const ages = plan.alarms.alarms.filter((a) => a.metricName === 'ApproximateAgeOfOldestMessage');
    expect(ages.map((a) => [a.name, a.dimensions])).toEqual([
      ['queuebox-prod-sqs-oldest-jobs', { QueueName: 'jobs-in' }],
    ]);
    const alarmsLine = plan.idleCost.items.find((i) => i.item === 'CloudWatch alarms');
    expect(alarmsLine?.detail).toContain(`${plan.alarms.alarms.length} alarm(s)`);
    expect(plan.alarms.alarms.length).toBeGreaterThan(0);
    expect(without.alarms.alarms.some((a) => a.namespace === 'AWS/SQS')).toBe(false);
  });

  it('warns, without refusing, when a stage other than a development one has no alarm subscriber', () => {
    // Prepare
    const nobody = aDeployConfig(aConfigInput());
    const subscribed = aDeployConfig(aConfigInput({ aws: { alarms: { email: ['ops@example.com'] } } }));

    // Act
    const prod = planDeployment(nobody, { app: 'queuebox', stage: 'prod', env: {} });
    const dev = planDeployment(nobody, { app: 'queuebox', stage: 'dev', env: {} });
    const own = planDeployment(nobody, { app: 'queuebox', stage: 'alice', env: { USER: 'alice' } });
    const withEmail = planDeployment(subscribed, { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    expect(prod.warnings).toEqual([
      expect.stringContaining('notify an SNS topic nobody subscribes to. List addresses in aws.alarms.email'),
    ]);
    expect(prod.warnings[0]).toContain('alarmTopic output');
    expect(prod.alarms.emails).toEqual([]);
    expect([dev.warnings, own.warnings, withEmail.warnings]).toEqual([[], [], []]);
  });

  it('shows what config check warns of, with the webhook URLs public: an open source, a route never chosen', () => {
    // Prepare: http.host is loopback (the default), which kept the open-source warning quiet locally
    const loaded = aDeployConfig(
      aConfigInput({
        sources: { stripe: anHttpSource(), partner: anHttpSource({ auth: { scheme: 'none' } }) },
        routes: [
          { match: '#', destination: 'billing' },
          { match: 'stripe.#', destination: 'billing' },
        ],
        aws: { alarms: { email: ['ops@example.com'] } },
      }),
    );

    // Act: the deploy printed none of these before
    const plan = planDeployment(loaded, { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    expect(plan.warnings).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^sources\.partner\.auth\.scheme: is none, and on AWS its webhook URL is public/,
        ),
        expect.stringMatching(/^routes\[1\]\.match: "stripe\.#" is never chosen/),
      ]),
    );
  });

  it('by default attaches no function to a VPC and creates no NAT: Aurora is reached through the Data API', () => {
    // Prepare
    const loaded = aDeployConfig(aConfigInput());

    // Act
    const plan = planDeployment(loaded, { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    expect(plan.network).toEqual({ kind: 'outside', azs: 2 });
    expect(plan.database).toMatchObject({ kind: 'aurora', access: 'data-api' });
    const shipped = JSON.parse(plan.functionConfig.slice(plan.functionConfig.indexOf('{')));
    expect(shipped.database).toEqual({
      provider: 'postgres',
      dataApi: {
        resourceArn: 'env://DATABASE_CLUSTER_ARN',
        secretArn: 'env://DATABASE_SECRET_ARN',
        database: 'queuebox',
      },
    });
    expect(plan.idleCost.items.map((i) => i.item).filter((i) => /NAT|IPv4|Cloud Map/.test(i))).toEqual([]);
  });

  it('collects every infra problem into one ConfigError', () => {
    // Prepare
    const loaded = aDeployConfig(
      aConfigInput({
        sources: {
          stripe: anHttpSource({ auth: { scheme: 'bearer', secrets: ['env://MISSING_TOKEN'] } }),
          orders: anAmqpSource(),
        },
        aws: { network: { functionsInVpc: true, nat: 'none' } },
      }),
    );

    // Act
    let error: unknown;
    try {
      planDeployment(loaded, { app: 'queuebox', stage: 'dev', env: {} });
    } catch (e) {
      error = e;
    }

    // Assess
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.path)).toEqual([
      'aws.network.nat',
      'aws.sources.orders.mqBrokerArn',
      'sources.stripe.auth.secrets.0',
    ]);
  });
});
