import { createExistingNetworkDatabaseAccess } from './database-network.ts';
import { AURORA_DATABASE_NAME, auroraTransform } from './database-plan.ts';
import { InfraPlanError } from './errors.ts';
import type { Network } from './network.ts';
import type { DeployPlan } from './plan.ts';
import { createDatabaseUrlSecret, type SecretCopy } from './secret-copies.ts';

// Default: Aurora Serverless v2 PostgreSQL that pauses to zero capacity after `pauseAfterMinutes` without
// connections, with the RDS Data API on: the functions (outside any VPC) send SQL over HTTPS and hold no
// connection, so nothing keeps the cluster awake between calls. With the functions in a VPC they connect with
// `pg` through a URL secret instead. Otherwise an existing PostgreSQL or SQL Server whose connection URL sits in a
// Secrets Manager secret (aws.database.secretArn); infra only grants the functions read access to it.

/** The database as the rest of infra needs it. */
export interface Database {
  readonly plan: DeployPlan['database'];
  /**
   * ARN of the secret the functions read: the connection URL, or with the Data API the cluster's master secret
   * (the Data API signs in with it on the caller's behalf).
   */
  readonly secretArn: $util.Input<string>;
  /** ARN of the Aurora cluster when the functions reach it through the Data API. */
  readonly clusterArn?: $util.Input<string>;
  /** Resources the functions and the migration must wait for. */
  readonly ready: $util.Resource[];
  readonly aurora?: sst.aws.Aurora;
}

/** Creates the Aurora cluster and its URL secret, or refers to the existing database's secret. */
export function createDatabase(
  plan: Pick<DeployPlan, 'database' | 'network' | 'service'>,
  network: Network,
  options: { readonly retain: boolean },
): Database {
  const { database } = plan;
  if (database.kind === 'existing') return { plan: database, secretArn: database.secretArn, ready: [] };
  const { aurora: settings } = database;
  // sst.aws.Aurora takes `{ subnets, securityGroups }`; existing subnets also need a group admitting the functions.
  const vpc =
    network.databaseVpc ??
    network.vpc ??
    (plan.network.kind === 'existing'
      ? createExistingNetworkDatabaseAccess({
          service: plan.service,
          privateSubnetIds: plan.network.privateSubnetIds,
          functionSecurityGroupIds: plan.network.securityGroupIds,
        }).vpc
      : undefined);
  if (vpc === undefined) throw new InfraPlanError('a created network has a VPC');
  const aurora = new sst.aws.Aurora('Database', {
    engine: 'postgres',
    version: settings.version,
    database: AURORA_DATABASE_NAME,
    vpc,
    dataApi: database.access === 'data-api',
    scaling: {
      min: `${settings.minAcu} ACU`,
      max: `${settings.maxAcu} ACU`,
      ...(settings.minAcu === 0 ? { pauseAfter: `${settings.pauseAfterMinutes} minutes` } : {}),
    },
    // Automatic minor upgrades (SST turns them off) and idle_session_timeout: see auroraTransform.
    transform: auroraTransform(settings),
  });
  if (database.access === 'data-api') {
    return {
      plan: database,
      secretArn: aurora.secretArn,
      clusterArn: aurora.clusterArn,
      ready: [aurora],
      aurora,
    };
  }
  const url: SecretCopy = createDatabaseUrlSecret(
    database.urlSecretName,
    {
      host: aurora.host,
      port: aurora.port,
      username: aurora.username,
      password: aurora.password,
      database: aurora.database,
    },
    { dependsOn: [aurora] },
    options.retain,
  );
  return { plan: database, secretArn: url.secret.arn, ready: [aurora, url.version], aurora };
}
