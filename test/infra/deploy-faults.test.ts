// Deploy-time faults found by reading infra/ against SST's component sources and AWS's documentation (issue 14),
// each shown on the resources infra builds (Pulumi mocks) or on the plan it refuses.
import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { API_ARGS, MAX_WEBHOOK_BODY_BYTES } from '../../infra/api-plan.ts';
import { loadDeployConfig } from '../../infra/config.ts';
import { auroraConnectionUrl } from '../../infra/database-plan.ts';
import { functionArgs, LAMBDA_POOL_SIZE } from '../../infra/functions-plan.ts';
import { planDeployment } from '../../infra/plan.ts';
import { isDevelopmentStage, isLocalOnlyHost } from '../../infra/stage-plan.ts';
import { aConfigInput, aDeployConfig, aKafkaSource, anHttpSource, MQ_SECRET, MSK_ARN } from './fixtures.ts';
import { usePulumiMocks } from './pulumi-mocks.ts';

const { inputsOf } = usePulumiMocks({ 'aws:ec2/getSubnet:getSubnet': { vpcId: 'vpc-0abc' } });

const ROOT = new URL('../..', import.meta.url).pathname;
const ACCOUNT = { partition: 'aws', region: 'eu-west-1', accountId: '123456789012' };
const KMS_KEY = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const SCRAM_SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_clicks-AbCdEf';

function refusal(act: () => unknown): ConfigError {
  try {
    act();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('Aurora in existing subnets (item 2)', () => {
  it("gives sst.aws.Aurora { subnets, securityGroups } and a group admitting only the functions' groups on 5432", async () => {
    // Prepare
    const { createExistingNetworkDatabaseAccess } = await import('../../infra/database-network.ts');

    // Act
    const access = createExistingNetworkDatabaseAccess({
      service: 'queuebox-prod',
      privateSubnetIds: ['subnet-0a', 'subnet-0b'],
      functionSecurityGroupIds: ['sg-0f1'],
    });

    // Assess
    const [group] = await inputsOf([access.securityGroup], 'aws:ec2/securityGroup:SecurityGroup');
    expect(group?.inputs).toMatchObject({
      vpcId: 'vpc-0abc',
      ingress: [{ protocol: 'tcp', fromPort: 5432, toPort: 5432, securityGroups: ['sg-0f1'] }],
      egress: [],
    });
    expect(Object.keys(access.vpc).sort()).toEqual(['securityGroups', 'subnets']);
    expect(access.vpc.subnets).toEqual(['subnet-0a', 'subnet-0b']);
  });
});

describe('MSK SASL/SCRAM and secrets under a customer-managed key (item 3)', () => {
  const scram = (auth: Record<string, unknown>) =>
    aDeployConfig(
      aConfigInput({
        sources: { clicks: aKafkaSource() },
        aws: { sources: { clicks: { mskClusterArn: MSK_ARN, auth } } },
      }),
    );

  it('refuses SASL/SCRAM on MSK without the key, or with a secret MSK cannot associate', () => {
    // Act
    const error = refusal(() =>
      planDeployment(scram({ type: 'sasl-scram-512', secretArn: MQ_SECRET }), {
        app: 'queuebox',
        stage: 'prod',
        env: {},
      }),
    );

    // Assess
    expect(error.issues.map((i) => i.path)).toEqual([
      'aws.sources.clicks.auth.kmsKeyArn',
      'aws.sources.clicks.auth.secretArn',
    ]);
    expect(error.issues[0]?.message).toMatch(/customer-managed KMS key/);
    expect(error.issues[1]?.message).toMatch(/AmazonMSK_/);
  });

  it('grants kafka-source kms:Decrypt on the key only through Secrets Manager of its region', async () => {
    // Prepare
    const { createFunctionPolicies } = await import('../../infra/permissions.ts');
    const plan = planDeployment(
      scram({ type: 'sasl-scram-512', secretArn: SCRAM_SECRET, kmsKeyArn: KMS_KEY }),
      {
        app: 'queuebox',
        stage: 'prod',
        env: {},
      },
    );

    // Act
    const policies = createFunctionPolicies(
      plan,
      { 'kafka-source': 'role-kafka', 'outbox-tick': 'role-outbox' },
      {
        account: ACCOUNT,
        functionArns: {},
        managedSecretArns: [],
        databaseSecretArn: 'queuebox/prod/database',
      },
    );

    // Assess
    const inputs = await inputsOf(Object.values(policies), 'aws:iam/rolePolicy:RolePolicy');
    const statements = (name: string) =>
      (JSON.parse(String(inputs.find((i) => i.name === name)?.inputs.policy)) as { Statement: unknown[] })
        .Statement;
    expect(statements('KafkaSourcePolicy')).toContainEqual({
      Sid: 'TriggerBrokerCredentialsKey',
      Effect: 'Allow',
      Action: ['kms:Decrypt'],
      Resource: [KMS_KEY],
      Condition: { StringEquals: { 'kms:ViaService': 'secretsmanager.eu-west-1.amazonaws.com' } },
    });
    expect(JSON.stringify(statements('OutboxTickPolicy'))).not.toContain('kms:');
  });

  it('grants the same for a self-managed Kafka secret under a customer key, and refuses a key without a secret', () => {
    // Prepare
    const withKey = aDeployConfig(
      aConfigInput({
        sources: { clicks: aKafkaSource() },
        aws: {
          sources: { clicks: { auth: { type: 'sasl-scram-256', secretArn: MQ_SECRET, kmsKeyArn: KMS_KEY } } },
        },
      }),
    );
    const keyWithoutSecret = aDeployConfig(
      aConfigInput({
        sources: { clicks: aKafkaSource() },
        aws: { sources: { clicks: { auth: { type: 'none', kmsKeyArn: KMS_KEY } } } },
      }),
    );

    // Act
    const plan = planDeployment(withKey, { app: 'queuebox', stage: 'prod', env: {} });
    const error = refusal(() =>
      planDeployment(keyWithoutSecret, { app: 'queuebox', stage: 'prod', env: {} }),
    );

    // Assess
    expect(plan.brokerTriggers[0]?.auth).toEqual({
      type: 'sasl-scram-256',
      secretArn: MQ_SECRET,
      kmsKeyArn: KMS_KEY,
    });
    expect(error.issues.map((i) => i.path)).toEqual(['aws.sources.clicks.auth.kmsKeyArn']);
  });
});

describe('secrets the functions read under a customer-managed key', () => {
  it('grants every function kms:Decrypt on aws.secrets.kmsKeyArns through Secrets Manager only', async () => {
    // Prepare
    const { functionPolicyStatements } = await import('../../infra/permissions.ts');
    const plan = planDeployment(
      aDeployConfig(aConfigInput({ aws: { secrets: { kmsKeyArns: [KMS_KEY] } } })),
      { app: 'queuebox', stage: 'prod', env: {} },
    );

    // Act
    const statements = functionPolicyStatements('admin-http', plan, {
      account: ACCOUNT,
      functionArns: {},
      managedSecretArns: [],
      databaseSecretArn: 'queuebox/prod/database',
    });

    // Assess
    expect(statements).toContainEqual({
      Sid: 'DecryptConfigurationSecrets',
      Effect: 'Allow',
      Action: ['kms:Decrypt'],
      Resource: [KMS_KEY],
      Condition: { StringEquals: { 'kms:ViaService': 'secretsmanager.eu-west-1.amazonaws.com' } },
    });
  });
});

describe('the shipped demo configuration outside development stages (item 4)', () => {
  it('refuses the loopback destination and both public whsec_ secrets of queuebox.yaml on stage prod, naming file, line and key', async () => {
    // Prepare
    const loaded = await loadDeployConfig({ root: ROOT, env: {} });

    // Act
    const error = refusal(() => planDeployment(loaded, { app: 'queuebox', stage: 'prod', env: {} }));

    // Assess
    expect(error.issues.map((i) => i.path)).toEqual([
      'destinations.demo-receiver.url',
      'sources.demo.auth.secrets[0]',
      'destinations.demo-receiver.signing.secrets[0]',
    ]);
    for (const issue of error.issues) expect(issue.origin).toMatch(/^queuebox\.yaml:\d+$/);
    expect(error.message).toMatch(/127\.0\.0\.1, a loopback or link-local address/);
    expect(error.message).toMatch(/public demo secret/);
  });

  it('deploys the demo to a development stage or the deploying user’s own stage', async () => {
    // Prepare
    const loaded = await loadDeployConfig({ root: ROOT, env: {} });

    // Act
    const dev = planDeployment(loaded, { app: 'queuebox', stage: 'dev', env: {} });
    const personal = planDeployment(loaded, { app: 'queuebox', stage: 'alice', env: { USER: 'alice' } });

    // Assess
    expect(dev.stage).toBe('dev');
    expect(personal.stage).toBe('alice');
  });

  it('warns, outside development stages, of credentials written as literal text (shipped in the bundle)', () => {
    // Prepare: literal secrets in each place, beside references and harmless values.
    const input = aConfigInput({
      sources: {
        stripe: {
          ...anHttpSource(),
          auth: { scheme: 'bearer', secrets: ['tok-literal-123', 'secret://tokens#b'] },
        },
      },
      destinations: {
        billing: {
          type: 'http',
          url: 'https://billing.example/hooks?code=abc123',
          headers: { Authorization: 'Bearer literal', 'X-Region': 'eu', 'X-Functions-Key': 'secret://fk' },
          signing: {
            scheme: 'standard-webhooks',
            secrets: [`whsec_${Buffer.from('a literal key of 24 bytes').toString('base64')}`],
          },
        },
        queue: { type: 'rabbitmq', url: 'amqps://app:pa55@mq.example:5671', exchange: 'x' },
      },
      routes: [{ match: 'stripe.#', destination: 'billing' }],
    });

    // Act
    const prod = planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });
    const dev = planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'dev', env: {} });
    const clean = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    const warning = prod.warnings.find((w) => w.includes('written as literal text'));
    expect(warning).toMatch(
      /^sources\.stripe\.auth\.secrets\[0\], destinations\.billing\.url, destinations\.billing\.headers\.Authorization, destinations\.billing\.signing\.secrets\[0\], destinations\.queue\.url hold credentials written as literal text: on stage "prod"/,
    );
    expect(warning).not.toContain('tok-literal-123');
    expect(dev.warnings.some((w) => w.includes('written as literal text'))).toBe(false);
    expect(clean.warnings.some((w) => w.includes('written as literal text'))).toBe(false);
  });

  it('knows loopback, link-local and unspecified hosts from real ones', () => {
    for (const host of [
      '127.0.0.1',
      '127.8.0.1',
      'localhost',
      'api.localhost',
      '::1',
      '[::1]',
      '169.254.169.254',
      'fe80::1',
      '0.0.0.0',
      '::ffff:127.0.0.1',
    ]) {
      expect(isLocalOnlyHost(host), host).toBe(true);
    }
    for (const host of [
      '10.0.0.5',
      'billing.example',
      '172.16.0.1',
      '2001:db8::1',
      'localhost.example.com',
    ]) {
      expect(isLocalOnlyHost(host), host).toBe(false);
    }
    expect(isDevelopmentStage('prod')).toBe(false);
    expect(isDevelopmentStage('production', '')).toBe(false);
    expect(isDevelopmentStage('dev-alice')).toBe(true);
  });
});

describe('alarms that keep their state (item 7)', () => {
  it('keeps the gauge alarms’ state while no datapoint arrives and alarms when the gauges stop for three runs', async () => {
    // Prepare
    const { createAlarms } = await import('../../infra/alarms.ts');
    const plan = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });

    // Act
    const alarms = createAlarms(plan.alarms, Object.fromEntries(plan.functions.map((f) => [f.name, f.name])));

    // Assess
    const inputs = await inputsOf(alarms.alarms, 'aws:cloudwatch/metricAlarm:MetricAlarm');
    const gauges = inputs.filter(
      (a) =>
        a.inputs.namespace === 'QueueBox' &&
        a.name !== 'GaugesHeartbeatAlarm' &&
        a.inputs.metricName !== 'IngestFailures' &&
        a.inputs.metricName !== 'AdminFailures' &&
        a.inputs.metricName !== 'Dead',
    );
    expect(gauges).toHaveLength(4);
    for (const gauge of gauges) expect(gauge.inputs.treatMissingData).toBe('ignore');
    expect(inputs.find((a) => a.name === 'GaugesHeartbeatAlarm')?.inputs).toMatchObject({
      namespace: 'QueueBox',
      metricName: 'DeadRows',
      dimensions: { service: 'queuebox-prod', Table: 'outbox' },
      statistic: 'SampleCount',
      // One maintenance period (daily by default) per evaluation: three days without any gauge.
      period: 86_400,
      evaluationPeriods: 3,
      threshold: 1,
      comparisonOperator: 'LessThanThreshold',
      treatMissingData: 'breaching',
    });
  });

  it('pages for each new batch of dead rows, which the latched DeadRows alarms cannot', async () => {
    // Prepare
    const { createAlarms } = await import('../../infra/alarms.ts');
    const plan = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });

    // Act
    const alarms = createAlarms(plan.alarms, Object.fromEntries(plan.functions.map((f) => [f.name, f.name])));

    // Assess: the counter every function sends as rows go dead (outbox-tick, relay-tick, the broker sources), by
    // { service } alone, the dimension set they send it with; no datapoint is no new dead row.
    const inputs = await inputsOf(alarms.alarms, 'aws:cloudwatch/metricAlarm:MetricAlarm');
    expect(inputs.find((a) => a.name === 'NewDeadRowsAlarm')?.inputs).toMatchObject({
      name: 'queuebox-prod-new-dead-rows',
      namespace: 'QueueBox',
      metricName: 'Dead',
      dimensions: { service: 'queuebox-prod' },
      statistic: 'Sum',
      period: 300,
      evaluationPeriods: 1,
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
      treatMissingData: 'notBreaching',
    });
  });
});

describe('concurrency limits (item 9)', () => {
  it('reserves 2 instances for outbox-tick and relay-tick, 1 for maintenance and migrate, none for the HTTP functions', () => {
    // Act
    const plan = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    const reserved = Object.fromEntries(plan.functions.map((f) => [f.name, f.reservedConcurrency]));
    expect(reserved).toEqual({
      'outbox-tick': 2,
      'relay-tick': 2,
      'maintenance-tick': 1,
      migrate: 1,
      'inbox-http': undefined,
      'admin-http': undefined,
    });
    const outbox = plan.functions.find((f) => f.name === 'outbox-tick');
    if (!outbox) throw new Error('no outbox-tick');
    expect(functionArgs(plan, outbox, 'cfg.yaml').concurrency).toEqual({ reserved: 2 });
  });

  it('takes aws.functions.<fn>.reservedConcurrency, and false reserves none (accounts below 100 + reservations)', () => {
    // Prepare
    const input = aConfigInput({
      aws: {
        functions: { outboxTick: { reservedConcurrency: false }, inboxHttp: { reservedConcurrency: 20 } },
      },
    });

    // Act
    const plan = planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    const fn = (name: string) => plan.functions.find((f) => f.name === name);
    expect(fn('outbox-tick')?.reservedConcurrency).toBeUndefined();
    expect(functionArgs(plan, fn('outbox-tick') as never, 'cfg.yaml')).not.toHaveProperty('concurrency');
    expect(fn('inbox-http')?.reservedConcurrency).toBe(20);
  });

  it('ships a pool of 2 connections per instance, not the local default of 10 (a smaller written pool is kept)', () => {
    // Prepare: the functions connect with a URL (Aurora from inside the VPC); the Data API layout has no pool.
    const inVpc = { network: { functionsInVpc: true } };
    const written = aConfigInput({ database: { schema: 'qb', poolSize: 25 }, aws: inVpc });
    const small = aConfigInput({ database: { poolSize: 1 }, aws: inVpc });

    // Act
    const shipped = (input: Record<string, unknown>) =>
      JSON.parse(
        planDeployment(aDeployConfig(input), {
          app: 'queuebox',
          stage: 'prod',
          env: {},
        }).functionConfig.replace(/^#.*\n/, ''),
      ) as { database: { poolSize?: number; schema?: string; dataApi?: unknown } };

    // Assess
    expect(shipped(aConfigInput({ aws: inVpc })).database.poolSize).toBe(LAMBDA_POOL_SIZE);
    expect(shipped(written).database).toMatchObject({ poolSize: 2, schema: 'qb' });
    expect(shipped(small).database.poolSize).toBe(1);
    expect(shipped(aConfigInput()).database).toMatchObject({ dataApi: expect.any(Object) });
    expect(shipped(aConfigInput()).database).not.toHaveProperty('poolSize');
  });
});

describe('smaller deploy faults (item 10)', () => {
  it('refuses an inbox.maxBodyBytes that API Gateway + Lambda cannot carry', () => {
    // Prepare
    const input = aConfigInput({ inbox: { maxBodyBytes: 5 * 1024 * 1024 } });

    // Act
    const error = refusal(() =>
      planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} }),
    );

    // Assess
    expect(error.issues.map((i) => i.path)).toEqual(['inbox.maxBodyBytes']);
    expect(MAX_WEBHOOK_BODY_BYTES).toBe(3_129_344);
    // A body at the cap, escaped as JSON text (×2) inside the event, still fits 6 MiB with the envelope.
    expect(MAX_WEBHOOK_BODY_BYTES * 2 + 32 * 1024).toBeLessThanOrEqual(6 * 1024 * 1024);
  });

  it('refuses a pinned Aurora minor version and accepts a major one', () => {
    // Prepare
    const pinned = aConfigInput({ aws: { database: { aurora: { version: '16.4' } } } });
    const major = aConfigInput({ aws: { database: { aurora: { version: '16' } } } });

    // Act
    const error = refusal(() =>
      planDeployment(aDeployConfig(pinned), { app: 'queuebox', stage: 'prod', env: {} }),
    );
    const plan = planDeployment(aDeployConfig(major), { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    expect(error.issues.map((i) => i.path)).toEqual(['aws.database.aurora.version']);
    expect(error.message).toMatch(/major version only \(16\)/);
    expect(plan.database.kind === 'aurora' && plan.database.aurora.version).toBe('16');
  });

  it('verifies the Aurora certificate against the RDS CAs of the Lambda runtime, and turns CORS off', () => {
    // Act
    const plan = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });
    const url = auroraConnectionUrl({ host: 'db', port: 5432, username: 'u', password: 'p', database: 'q' });

    // Assess
    expect(new URL(url).searchParams.get('sslmode')).toBe('verify-full');
    expect(plan.environment.NODE_EXTRA_CA_CERTS).toBe('/var/runtime/ca-cert.pem');
    expect(API_ARGS).toEqual({ cors: false });
  });

  it("keeps the database URL secret of a retaining stage recoverable for 7 days, and a removable stage's not at all", async () => {
    // Prepare
    const { createDatabaseUrlSecret } = await import('../../infra/secret-copies.ts');
    const connection = { host: 'db', port: 5432, username: 'postgres', password: 'pw', database: 'queuebox' };

    // Act
    const retained = createDatabaseUrlSecret('queuebox/prod/database', connection, {}, true);

    // Assess
    const [secret] = await inputsOf([retained.secret], 'aws:secretsmanager/secret:Secret');
    expect(secret?.inputs.recoveryWindowInDays).toBe(7);
  });

  it("re-runs migrate when the Aurora cluster is replaced: its resource id is one of the invocation's triggers", async () => {
    // Prepare
    const { createMigrationRun, deployedMigrationsHash } = await import('../../infra/migrations.ts');
    const plan = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });
    const hash = await deployedMigrationsHash(plan.database.provider);

    // Act
    const run = createMigrationRun({
      functionName: 'queuebox-prod-migrate',
      hash,
      database: plan.database,
      cluster: 'cluster-ABCDEFGHIJ',
    });

    // Assess
    const [invocation] = await inputsOf([run], 'aws:lambda/invocation:Invocation');
    expect(invocation?.inputs.triggers).toEqual({
      migrations: hash,
      schema: 'queuebox',
      database: 'aurora:queuebox/prod/database',
      cluster: 'cluster-ABCDEFGHIJ',
    });
    expect(JSON.parse(String(invocation?.inputs.input))).toEqual({ trigger: 'deploy', migrationsHash: hash });
  });
});
