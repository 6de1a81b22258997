import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInMemorySecretResolver, loadConfig, parseConfig } from '@queuebox/config';
import { ConfigError } from '@queuebox/core';
import { FUNCTION_NAMES, handlerOf } from '@queuebox/deploy-contract';
import { describe, expect, it } from 'vitest';
import { planAlarms } from '../../infra/alarms-plan.ts';
import { planRoutes, webhookUrl } from '../../infra/api-plan.ts';
import { planBrokerTriggers } from '../../infra/brokers-plan.ts';
import { collectReferences } from '../../infra/config.ts';
import { functionConfigDocument } from '../../infra/config-plan.ts';
import { auroraConnectionUrl, planDatabase } from '../../infra/database-plan.ts';
import { InfraPlanError } from '../../infra/errors.ts';
import { planFunctions } from '../../infra/functions-plan.ts';
import { functionsInVpc, planNetwork } from '../../infra/network-plan.ts';
import { planDeployment } from '../../infra/plan.ts';
import { planIdleWarnings, planSchedules, scheduleExpression } from '../../infra/schedules-plan.ts';
import { planEnvironment, planSecrets, sstSecretName } from '../../infra/secrets-plan.ts';
import { planWakeups } from '../../infra/wake-ups-plan.ts';
import {
  aConfig,
  aConfigInput,
  aDeployConfig,
  aKafkaSource,
  aNatsSource,
  anAmqpSource,
  anHttpSource,
  anSqsSource,
  DB_SECRET,
  MQ_ARN,
  MQ_SECRET,
  MSK_ARN,
} from './fixtures.ts';

const names = (plans: readonly { name: string }[]) => plans.map((p) => p.name);

describe('planFunctions', () => {
  it('creates only the always-on functions when no source is configured', () => {
    // Prepare
    const config = parseConfig({});

    // Act
    const plans = planFunctions(config);

    // Assess
    expect(names(plans)).toEqual(['outbox-tick', 'maintenance-tick', 'migrate', 'admin-http']);
  });

  it('adds a function per source type and the relay for push sources', () => {
    // Prepare
    const config = aConfig({
      sources: {
        stripe: anHttpSource(),
        clicks: aKafkaSource(),
        orders: anAmqpSource(),
        audit: aNatsSource(),
        jobs: anSqsSource(),
      },
    });

    // Act
    const plans = planFunctions(config);

    // Assess
    expect(names(plans)).toEqual([...FUNCTION_NAMES]);
    expect(plans.map((p) => p.handler)).toEqual(FUNCTION_NAMES.map(handlerOf));
  });

  it('leaves the relay out when every source is pull or the relay is off', () => {
    // Prepare
    const pullOnly = aConfig({ sources: { stripe: anHttpSource({ mode: 'pull' }) } });
    const relayOff = aConfig({ inbox: { relay: { enabled: false } } });

    // Act
    const pullPlans = names(planFunctions(pullOnly));
    const offPlans = names(planFunctions(relayOff));

    // Assess
    expect(pullPlans).toContain('inbox-http');
    expect(pullPlans).not.toContain('relay-tick');
    expect(offPlans).not.toContain('relay-tick');
  });

  it('takes timeouts, memory and rates from aws.functions and keeps the leases', () => {
    // Prepare
    const config = aConfig({
      outbox: { claimTimeoutMs: 120_000 },
      aws: {
        functions: {
          outboxTick: { timeoutSeconds: 90, memoryMb: 1024, rateMinutes: 15 },
          inboxHttp: { timeoutSeconds: 10 },
        },
      },
    });

    // Act
    const plans = planFunctions(config);

    // Assess
    const outbox = plans.find((p) => p.name === 'outbox-tick');
    expect(outbox).toMatchObject({
      id: 'OutboxTick',
      timeoutSeconds: 90,
      memoryMb: 1024,
      rateMinutes: 15,
      claimLeaseMs: 120_000,
    });
    expect(plans.find((p) => p.name === 'inbox-http')).toMatchObject({ timeoutSeconds: 10, memoryMb: 512 });
    expect(plans.find((p) => p.name === 'inbox-http')).not.toHaveProperty('rateMinutes');
  });

  it('refuses a tick whose timeout reaches its claim lease, even if validation let it through', () => {
    // Prepare: validated, then broken the way a validation gap would leave it
    const config = aConfig();
    const broken = {
      ...config,
      inbox: { ...config.inbox, relay: { ...config.inbox.relay, claimTimeoutMs: 60_000 } },
    };

    // Act
    const act = () => planFunctions(broken);

    // Assess
    expect(act).toThrow(InfraPlanError);
    expect(act).toThrow(/relay-tick would run up to 60 s but its claims last 60000 ms/);
  });
});

describe('planRoutes', () => {
  it('routes POST {basePath}/{source} to inbox-http and gives each HTTP source a webhook output', () => {
    // Prepare
    const config = aConfig({
      inbox: { basePath: '/hooks/v1' },
      sources: {
        stripe: anHttpSource(),
        partner: anHttpSource({ path: 'p-7' }),
        clicks: aKafkaSource(),
      },
    });

    // Act
    const { routes, webhooks } = planRoutes(config);

    // Assess
    expect(routes).toEqual([
      { route: 'POST /hooks/v1/{source}', function: 'inbox-http', auth: 'none' },
      { route: 'ANY /admin/{proxy+}', function: 'admin-http', auth: 'iam' },
      { route: 'GET /health', function: 'admin-http', auth: 'none' },
    ]);
    expect(webhooks).toEqual([
      { source: 'partner', path: '/hooks/v1/p-7', output: 'webhook-partner' },
      { source: 'stripe', path: '/hooks/v1/stripe', output: 'webhook-stripe' },
    ]);
  });

  it('has no inbox route without HTTP sources', () => {
    // Act
    const { routes, webhooks } = planRoutes(parseConfig({ sources: { clicks: aKafkaSource() } }));

    // Assess
    expect(routes.map((r) => r.route)).toEqual(['ANY /admin/{proxy+}', 'GET /health']);
    expect(webhooks).toEqual([]);
  });

  it('joins the API URL and a path with exactly one slash', () => {
    expect(webhookUrl('https://abc.execute-api.eu-west-1.amazonaws.com', '/inbox/stripe')).toBe(
      'https://abc.execute-api.eu-west-1.amazonaws.com/inbox/stripe',
    );
    expect(webhookUrl('https://api.example.com/qb/', '/inbox/stripe')).toBe(
      'https://api.example.com/qb/inbox/stripe',
    );
  });
});

describe('planSchedules', () => {
  it('schedules every tick at its configured rate', () => {
    // Prepare
    const config = aConfig({
      sources: { stripe: anHttpSource(), audit: aNatsSource() },
      aws: { functions: { relayTick: { rateMinutes: 30 }, maintenanceTick: { rateMinutes: 60 } } },
    });

    // Act
    const schedules = planSchedules(planFunctions(config));

    // Assess
    expect(schedules.map((s) => [s.function, s.expression])).toEqual([
      // The safety tick's default: every 6 h, on the clock.
      ['outbox-tick', 'cron(0 0/6 * * ? *)'],
      ['relay-tick', 'cron(0/30 * * * ? *)'],
      ['maintenance-tick', 'cron(0 * * * ? *)'],
      ['nats-source-tick', 'rate(1 minute)'],
    ]);
  });

  it('aligns rates that divide an hour or a day to the clock, so equal ticks fire together', () => {
    expect(scheduleExpression(1)).toBe('rate(1 minute)');
    expect(scheduleExpression(15)).toBe('cron(0/15 * * * ? *)');
    expect(scheduleExpression(60)).toBe('cron(0 * * * ? *)');
    expect(scheduleExpression(120)).toBe('cron(0 0/2 * * ? *)');
    expect(scheduleExpression(1440)).toBe('cron(0 0 * * ? *)');
    expect(scheduleExpression(7)).toBe('rate(7 minutes)');
    expect(scheduleExpression(90)).toBe('rate(90 minutes)');
    expect(() => scheduleExpression(0.5)).toThrow(InfraPlanError);
  });
});

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
      sources: { orders: anAmqpSource() },
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

  it('creates nothing for configurations without broker sources', () => {
    expect(planBrokerTriggers(aConfig())).toEqual({ triggers: [], issues: [] });
  });
});

describe('planSecrets', () => {
  it('makes an sst.Secret per referenced key and renames the references per stage', () => {
    // Prepare
    const input = aConfigInput({ admin: { token: 'secret://queuebox/admin#token' } });

    // Act
    const { secrets, issues } = planSecrets(collectReferences(input), aConfig(), 'queuebox/prod');

    // Assess
    expect(issues).toEqual([]);
    expect(secrets.managed).toEqual([
      {
        name: 'billing',
        secretsManagerName: 'queuebox/prod/billing',
        keys: [{ key: 'whsec', sstName: 'BillingWhsec' }],
      },
      {
        name: 'queuebox/admin',
        secretsManagerName: 'queuebox/prod/queuebox/admin',
        keys: [{ key: 'token', sstName: 'QueueboxAdminToken' }],
      },
      {
        name: 'stripe',
        secretsManagerName: 'queuebox/prod/stripe',
        keys: [{ key: 'webhook', sstName: 'StripeWebhook' }],
      },
    ]);
    expect(secrets.rewrites.get('secret://stripe#webhook')).toBe('secret://queuebox/prod/stripe#webhook');
  });

  it('leaves ARNs, listed external names and the database section alone', () => {
    // Prepare
    const input = aConfigInput({
      database: { url: 'secret://legacy-db#url' },
      sources: {
        stripe: anHttpSource({
          auth: { scheme: 'bearer', secrets: [`secret://${MQ_SECRET}`, 'secret://shared-token'] },
        }),
      },
    });

    // Act
    const { secrets } = planSecrets(
      collectReferences(input),
      aConfig({ aws: { secrets: { external: ['shared-token'] } } }),
      'queuebox/dev',
    );

    // Assess
    expect(secrets.external).toEqual([MQ_SECRET, 'shared-token']);
    expect(secrets.managed.map((m) => m.name)).toEqual(['billing']);
  });

  it('refuses one secret used both whole and by key, and names that collide as sst.Secret names', () => {
    // Prepare
    const input = {
      admin: { token: 'secret://stripe' },
      sources: {
        stripe: anHttpSource(),
        other: anHttpSource({ auth: { scheme: 'bearer', secrets: ['secret://a-b', 'secret://a_b'] } }),
      },
    };

    // Act
    const { issues } = planSecrets(collectReferences(input), aConfig(), 'qb/dev');

    // Assess
    expect(issues.map((i) => i.message)).toEqual([
      'secret://a-b and secret://a_b would both be set as AB; rename one',
      'secret://stripe is used both whole and with #key; use one form for a secret',
    ]);
  });

  it('turns names into sst.Secret names that start with a capital letter', () => {
    expect(sstSecretName('stripe', 'webhook')).toBe('StripeWebhook');
    expect(sstSecretName('prod/partner_api')).toBe('ProdPartnerApi');
    expect(sstSecretName('1password')).toBe('S1password');
  });
});

describe('planEnvironment', () => {
  it('passes env:// values from the deploying shell on to the functions', () => {
    // Prepare
    const input = aConfigInput({
      database: { url: 'env://DATABASE_URL' },
      sources: { partner: anHttpSource({ auth: { scheme: 'bearer', secrets: ['env://PARTNER_TOKEN'] } }) },
    });

    // Act
    const ok = planEnvironment(collectReferences(input), { PARTNER_TOKEN: 't0ken' });
    const missing = planEnvironment(collectReferences(input), {});

    // Assess: database.url is infra's own business
    expect(ok).toEqual({ variables: { PARTNER_TOKEN: 't0ken' }, issues: [] });
    expect(missing.issues).toEqual([
      {
        path: 'sources.partner.auth.secrets.0',
        message:
          'refers to PARTNER_TOKEN, which is not set where sst deploy runs (infra passes it to the functions)',
      },
    ]);
  });

  it('refuses variables Lambda reserves', () => {
    // Prepare
    const input = {
      sources: { p: anHttpSource({ auth: { scheme: 'bearer', secrets: ['env://AWS_REGION'] } }) },
    };

    // Act
    const { issues } = planEnvironment(collectReferences(input), { AWS_REGION: 'eu-west-1' });

    // Assess
    expect(issues[0]?.message).toMatch(/AWS_REGION, which Lambda reserves/);
  });
});

describe('planDatabase and planNetwork', () => {
  it('defaults to a pausable Aurora PostgreSQL whose URL secret is named per stage', () => {
    // Act
    const database = planDatabase(aConfig({ database: { schema: 'qb' } }), undefined, 'queuebox/prod');

    // Assess
    expect(database).toMatchObject({
      kind: 'aurora',
      provider: 'postgres',
      aurora: { minAcu: 0, maxAcu: 4, pauseAfterMinutes: 5 },
      urlSecretName: 'queuebox/prod/database',
      url: 'secret://queuebox/prod/database#url',
      schema: 'qb',
    });
  });

  it('uses an existing database through its secret, with the provider written in the configuration', () => {
    // Act
    const database = planDatabase(
      aConfig({ aws: { database: { secretArn: DB_SECRET, urlKey: 'connection' } } }),
      'sqlserver',
      'queuebox/prod',
    );

    // Assess
    expect(database).toEqual({
      kind: 'existing',
      provider: 'sqlserver',
      secretArn: DB_SECRET,
      url: `secret://${DB_SECRET}#connection`,
      schema: 'queuebox',
    });
  });

  it('encodes credentials into the Aurora URL and asks for TLS', () => {
    expect(
      auroraConnectionUrl({
        host: 'db.cluster',
        port: 5432,
        username: 'postgres',
        password: 'p@ss/w',
        database: 'queuebox',
      }),
    ).toBe('postgres://postgres:p%40ss%2Fw@db.cluster:5432/queuebox?sslmode=verify-full');
  });

  it('runs the functions outside any VPC by default (no NAT), with the Data API to Aurora', () => {
    // Prepare
    const config = aConfig();

    // Act
    const aurora = planDatabase(config, undefined, 'qb/dev', functionsInVpc(config));
    const network = planNetwork(config, aurora);

    // Assess
    expect(functionsInVpc(config)).toBe(false);
    expect(aurora).toMatchObject({ kind: 'aurora', access: 'data-api' });
    expect(network).toEqual({ network: { kind: 'outside', azs: 2 }, issues: [] });
  });

  it('puts the functions in a VPC for an existing database, and refuses functionsInVpc: false with one', () => {
    // Prepare
    const existing = aConfig({ aws: { database: { secretArn: DB_SECRET } } });
    const refused = aConfig({
      aws: { database: { secretArn: DB_SECRET }, network: { functionsInVpc: false } },
    });

    // Act
    const inVpc = planNetwork(
      existing,
      planDatabase(existing, undefined, 'qb/dev', functionsInVpc(existing)),
    );
    const outside = planNetwork(refused, planDatabase(refused, undefined, 'qb/dev', functionsInVpc(refused)));

    // Assess
    expect(inVpc.network).toEqual({ kind: 'create', nat: 'ec2', azs: 2 });
    expect(outside.issues.map((i) => i.path)).toEqual(['aws.network.functionsInVpc']);
  });

  it('creates a VPC with EC2 NAT when the functions run in a VPC, and refuses a new VPC without NAT', () => {
    // Prepare
    const inVpc = { functionsInVpc: true };
    const aurora = planDatabase(aConfig(), undefined, 'qb/dev', true);

    // Act
    const byDefault = planNetwork(aConfig({ aws: { network: inVpc } }), aurora);
    const withoutNat = planNetwork(aConfig({ aws: { network: { ...inVpc, nat: 'none' } } }), aurora);
    const existing = planNetwork(
      aConfig({
        aws: {
          network: { existing: { privateSubnetIds: ['subnet-0a1b'], securityGroupIds: ['sg-0c1d'] } },
        },
      }),
      aurora,
    );

    // Assess
    expect(byDefault).toEqual({ network: { kind: 'create', nat: 'ec2', azs: 2 }, issues: [] });
    expect(withoutNat.issues[0]?.path).toBe('aws.network.nat');
    expect(existing.network).toEqual({
      kind: 'existing',
      privateSubnetIds: ['subnet-0a1b'],
      securityGroupIds: ['sg-0c1d'],
    });
    expect(existing.issues[0]?.message).toMatch(/Aurora needs subnets in at least two availability zones/);
  });
});

describe('planWakeups', () => {
  it('lets sources wake the relay and the relay wake the outbox, targets created first', () => {
    // Prepare
    const functions = planFunctions(aConfig({ sources: { stripe: anHttpSource(), clicks: aKafkaSource() } }));

    // Act
    const wakeups = planWakeups(functions);

    // Assess
    expect(wakeups.map((w) => `${w.from}->${w.to}:${w.env}`)).toEqual([
      'inbox-http->relay-tick:RELAY_TICK_FUNCTION_NAME',
      'kafka-source->relay-tick:RELAY_TICK_FUNCTION_NAME',
      'admin-http->relay-tick:RELAY_TICK_FUNCTION_NAME',
      'relay-tick->outbox-tick:OUTBOX_TICK_FUNCTION_NAME',
      'admin-http->outbox-tick:OUTBOX_TICK_FUNCTION_NAME',
    ]);
    for (const w of wakeups)
      expect(FUNCTION_NAMES.indexOf(w.to)).toBeLessThan(FUNCTION_NAMES.indexOf(w.from));
  });

  it('wakes nothing that does not exist', () => {
    const functions = planFunctions(aConfig({ sources: { stripe: anHttpSource({ mode: 'pull' }) } }));
    expect(planWakeups(functions).map((w) => w.to)).toEqual(['outbox-tick']);
  });
});

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
});

describe('planIdleWarnings', () => {
  const aurora = (aurora: Record<string, unknown> = {}) =>
    planDatabase(aConfig({ aws: { database: { aurora } } }), undefined, 'qb/dev');

  it('warns when a schedule reaches a pausable Aurora more often than it pauses', () => {
    // Prepare
    const schedules = planSchedules(
      planFunctions(
        aConfig({
          aws: {
            functions: {
              outboxTick: { rateMinutes: 1 },
              relayTick: { rateMinutes: 1 },
              maintenanceTick: { rateMinutes: 5 },
            },
          },
        }),
      ),
    );

    // Act
    const warnings = planIdleWarnings(aurora(), schedules);

    // Assess
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /outbox-tick every 1 min, relay-tick every 1 min, maintenance-tick every 5 min/,
    );
  });

  it('stays quiet when every tick is slower than the pause, or the database cannot pause anyway', () => {
    // Prepare
    const slow = planSchedules(
      planFunctions(
        aConfig({
          aws: {
            functions: {
              outboxTick: { rateMinutes: 30 },
              relayTick: { rateMinutes: 30 },
              maintenanceTick: { rateMinutes: 60 },
            },
          },
        }),
      ),
    );
    const fast = planSchedules(planFunctions(aConfig()));

    // Act / Assess
    expect(planIdleWarnings(aurora(), slow)).toEqual([]);
    expect(planIdleWarnings(aurora({ minAcu: 0.5 }), fast)).toEqual([]);
  });
});

/** A Standard Webhooks signing secret long enough to pass validation (at least 24 bytes decoded). */
const BILLING_SIGNING_SECRET = 'whsec_2JlfwjtXCrAFGl47kya2ZpG7+G0bsJSzMg7Z3Ci3OWg';

describe('functionConfigDocument', () => {
  it('ships a file that loadConfig reads back with the secrets infra manages and the database infra chose', async () => {
    // Prepare
    const input = aConfigInput({
      database: { provider: 'postgres', url: 'env://DATABASE_URL', schema: 'app_queue', dataDir: '.x' },
    });
    // Functions in the VPC: a connection through the URL secret infra writes.
    const database = planDatabase(parseConfig(input), undefined, 'queuebox/prod', true);
    const { secrets } = planSecrets(collectReferences(input), parseConfig(input), 'queuebox/prod');
    const dir = await mkdtemp(join(tmpdir(), 'queuebox-infra-'));
    try {
      await writeFile(join(dir, 'queuebox.yaml'), functionConfigDocument(input, database, secrets));
      const resolver = createInMemorySecretResolver({
        'queuebox/prod/database': JSON.stringify({ url: 'postgres://qb:pw@aurora.internal:5432/queuebox' }),
        'queuebox/prod/stripe': JSON.stringify({ webhook: 'whsec_stripe' }),
        'queuebox/prod/billing': JSON.stringify({ whsec: BILLING_SIGNING_SECRET }),
      });

      // Act
      const config = await loadConfig({ cwd: dir, env: {}, secrets: resolver });

      // Assess
      expect(config.database).toMatchObject({
        provider: 'postgres',
        url: 'postgres://qb:pw@aurora.internal:5432/queuebox',
        schema: 'app_queue',
      });
      expect(config.sources.stripe?.type === 'http' && config.sources.stripe.auth).toEqual({
        scheme: 'stripe',
        secrets: ['whsec_stripe'],
        toleranceSec: 300,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('functionConfigDocument with the Data API', () => {
  it('ships database.dataApi whose ARNs the functions read from the variables infra sets', async () => {
    // Prepare
    const input = aConfigInput({
      database: { provider: 'postgres', url: 'env://DATABASE_URL', schema: 'app_queue' },
    });
    const database = planDatabase(parseConfig(input), undefined, 'queuebox/prod');
    const { secrets } = planSecrets(collectReferences(input), parseConfig(input), 'queuebox/prod');
    const dir = await mkdtemp(join(tmpdir(), 'queuebox-infra-'));
    try {
      await writeFile(join(dir, 'queuebox.yaml'), functionConfigDocument(input, database, secrets));
      const env = {
        DATABASE_CLUSTER_ARN: 'arn:aws:rds:us-east-1:123456789012:cluster:queuebox-prod-databasecluster-x',
        DATABASE_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:queuebox-prod-db-AbCdEf',
      };
      const resolver = createInMemorySecretResolver({
        'queuebox/prod/stripe': JSON.stringify({ webhook: 'whsec_stripe' }),
        'queuebox/prod/billing': JSON.stringify({ whsec: BILLING_SIGNING_SECRET }),
      });

      // Act
      const config = await loadConfig({ cwd: dir, env, secrets: resolver });

      // Assess
      expect(config.database).toMatchObject({
        provider: 'postgres',
        schema: 'app_queue',
        dataApi: {
          resourceArn: env.DATABASE_CLUSTER_ARN,
          secretArn: env.DATABASE_SECRET_ARN,
          database: 'queuebox',
        },
      });
      expect(config.database.url).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

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
    expect(plan.deferredTicks).toEqual(['outbox-tick', 'relay-tick']);
    expect(plan.webhooks.map((w) => w.output)).toEqual(['webhook-stripe']);
    expect(plan.functionConfig).toContain('secret://queuebox/prod/stripe#webhook');
    // The default safety ticks (6 h) and maintenance (daily) let Aurora pause: nothing to warn about.
    expect(plan.warnings).toEqual([]);
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
