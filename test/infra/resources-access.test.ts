// The plain AWS resources infra creates for access and deploy steps, built under Pulumi mocks (no engine, no AWS):
// function permissions, deferred ticks, migrations on deploy, secret copies and webhook outputs.
import * as pulumi from '@pulumi/pulumi';
import { describe, expect, it } from 'vitest';
import { collectReferences } from '../../infra/config.ts';
import { planDatabase } from '../../infra/database-plan.ts';
import { planSecrets } from '../../infra/secrets-plan.ts';
import { aBrokerPlan, aConfig, aConfigInput, anHttpSource, fnArn, MQ_ARN, MSK_ARN } from './fixtures.ts';
import { resolved, usePulumiMocks } from './pulumi-mocks.ts';

const { inputsOf } = usePulumiMocks();

const ACCOUNT = { partition: 'aws', region: 'eu-west-1', accountId: '123456789012' };

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
    // The copies of secret://stripe and secret://billing by one pattern of the stage's prefix, not ARN by ARN.
    expect(inbox.statements[0]?.Resource).toEqual([
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/database-Zz99Yy',
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/*',
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
          // secret://billing#whsec of the fixture: a managed copy under the stage's prefix.
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/dev/*',
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
