/**
 * The plain-AWS resources of the default layout under Pulumi mocks: Aurora's isolated subnets (no route out, no
 * NAT, nothing billed), the managed policy an application attaches to wake outbox-tick, and the functions' Data API
 * permission.
 */
import { describe, expect, it } from 'vitest';
import { createIsolatedDatabaseNetwork } from '../../infra/database-network.ts';
import { functionPolicyStatements } from '../../infra/permissions.ts';
import { planDeployment } from '../../infra/plan.ts';
import { createWakeOutboxPolicy } from '../../infra/wake-ups.ts';
import { aConfigInput, aDeployConfig } from './fixtures.ts';
import { resolved, usePulumiMocks } from './pulumi-mocks.ts';

const { registered, inputsOf } = usePulumiMocks({
  'aws:index/getAvailabilityZones:getAvailabilityZones': {
    names: ['eu-west-1a', 'eu-west-1b', 'eu-west-1c'],
  },
});

const CLUSTER = 'arn:aws:rds:eu-west-1:123456789012:cluster:queuebox-prod-databasecluster';
const SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox-prod-db-AbCdEf';
const ACCOUNT = { partition: 'aws', region: 'eu-west-1', accountId: '123456789012' };

describe('the isolated database network (functions outside any VPC)', () => {
  it('is a VPC with a private subnet per AZ and a group without ingress: no gateway, no NAT, no address', async () => {
    // Act
    const { vpc } = createIsolatedDatabaseNetwork({ azs: 2, service: 'queuebox-prod' });
    await Promise.all([...vpc.subnets, ...vpc.securityGroups].map((id) => resolved(id as never)));

    // Assess
    const types = registered.map((r) => r.type).sort();
    expect(types).toEqual([
      'aws:ec2/securityGroup:SecurityGroup',
      'aws:ec2/subnet:Subnet',
      'aws:ec2/subnet:Subnet',
      'aws:ec2/vpc:Vpc',
    ]);
    const subnets = registered.filter((r) => r.type === 'aws:ec2/subnet:Subnet').map((r) => r.inputs);
    expect(subnets.map((s) => s.availabilityZone)).toEqual(['eu-west-1a', 'eu-west-1b']);
    expect(subnets.every((s) => s.mapPublicIpOnLaunch === false)).toBe(true);
    const group = registered.find((r) => r.type === 'aws:ec2/securityGroup:SecurityGroup')?.inputs;
    expect(group?.ingress).toEqual([]);
  });
});

describe('the wake-outbox policy', () => {
  it('allows exactly lambda:InvokeFunction on outbox-tick', async () => {
    // Act
    const policy = createWakeOutboxPolicy(
      'queuebox-prod',
      'arn:aws:lambda:eu-west-1:123456789012:function:queuebox-prod-OutboxTick',
    );

    // Assess
    expect(policy).toBeDefined();
    const [created] = await inputsOf(policy ? [policy] : [], 'aws:iam/policy:Policy');
    expect(created?.inputs.name).toBe('queuebox-prod-wake-outbox');
    expect(JSON.parse(String(created?.inputs.policy))).toEqual({
      Version: '2012-10-17',
      Statement: [
        {
          Sid: 'WakeOutboxTick',
          Effect: 'Allow',
          Action: 'lambda:InvokeFunction',
          Resource: 'arn:aws:lambda:eu-west-1:123456789012:function:queuebox-prod-OutboxTick',
        },
      ],
    });
    expect(createWakeOutboxPolicy('queuebox-prod', undefined)).toBeUndefined();
  });
});

describe('function permissions with the Data API', () => {
  it('grant the four Data API calls on the cluster and reading its master secret', () => {
    // Prepare
    const plan = planDeployment(aDeployConfig(aConfigInput()), { app: 'queuebox', stage: 'prod', env: {} });

    // Act
    const statements = functionPolicyStatements('outbox-tick', plan, {
      account: ACCOUNT,
      functionArns: {},
      managedSecretArns: [],
      databaseSecretArn: SECRET,
      databaseClusterArn: CLUSTER,
    });

    // Assess
    expect(statements.find((s) => s.Sid === 'DataApi')).toEqual({
      Sid: 'DataApi',
      Effect: 'Allow',
      Action: [
        'rds-data:ExecuteStatement',
        'rds-data:BeginTransaction',
        'rds-data:CommitTransaction',
        'rds-data:RollbackTransaction',
      ],
      Resource: [CLUSTER],
    });
    expect(statements.find((s) => s.Sid === 'ReadConfigurationSecrets')?.Resource).toContain(SECRET);
  });
});
