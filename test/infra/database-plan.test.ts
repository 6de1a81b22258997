import { createInMemorySecretResolver, parseConfig, resolveReferences } from '@queuebox/config';
import { describe, expect, it } from 'vitest';
import { auroraConnectionUrl, auroraTransform, planDatabase } from '../../infra/database-plan.ts';
import { functionsInVpc, planNetwork } from '../../infra/network-plan.ts';
import { aConfig, DB_SECRET } from './fixtures.ts';

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

  it('reads an existing database from its RDS database secret with urlKey false, as managed rotation keeps it', async () => {
    // Prepare: the secret as RDS managed rotation writes it (no URL in it)
    const config = aConfig({ aws: { database: { secretArn: DB_SECRET, urlKey: false } } });
    const rdsSecret = {
      engine: 'postgres',
      host: 'orders.cluster-x.eu-west-1.rds.amazonaws.com',
      port: 5432,
      username: 'queuebox',
      password: 'r0t@ted/pw',
      dbname: 'orders',
    };

    // Act
    const database = planDatabase(config, 'postgres', 'queuebox/prod');
    const resolved = await resolveReferences(
      { database: { url: database.kind === 'existing' ? database.url : '' } },
      {
        env: {},
        secrets: createInMemorySecretResolver({ [DB_SECRET]: JSON.stringify(rdsSecret) }),
      },
    );

    // Assess: the functions read the whole secret and connect with what it holds now
    expect(database).toMatchObject({ kind: 'existing', url: `secret://${DB_SECRET}` });
    expect(parseConfig(resolved.value).database.url).toBe(
      'postgres://queuebox:r0t%40ted%2Fpw@orders.cluster-x.eu-west-1.rds.amazonaws.com:5432/orders?sslmode=verify-full',
    );
  });

  it("turns Aurora's automatic minor upgrades back on (SST creates the instance with them off)", () => {
    // Prepare
    const { aurora } = aConfig({}).aws.database;

    // Act
    const transform = auroraTransform(aurora);
    const withoutTimeout = auroraTransform({ ...aurora, idleSessionTimeoutSeconds: 0 });

    // Assess: SST merges an object transform over its ClusterInstance arguments
    expect(transform.instance).toEqual({ autoMinorVersionUpgrade: true });
    expect(transform.clusterParameterGroup).toEqual({
      parameters: [{ name: 'idle_session_timeout', value: '60000' }],
    });
    expect(withoutTimeout).toEqual({ instance: { autoMinorVersionUpgrade: true } });
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
