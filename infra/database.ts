import type { Network } from './network.ts';
import type { DatabasePlan } from './plan.ts';
import { createDatabaseUrlSecret, type SecretCopy } from './secret-copies.ts';

// Default: Aurora Serverless v2 PostgreSQL that pauses to zero capacity after `pauseAfterMinutes` without
// connections. Otherwise an existing PostgreSQL or SQL Server whose connection URL sits in a Secrets Manager
// secret (aws.database.secretArn); infra only grants the functions read access to it.

/** The database as the rest of infra needs it. */
export interface Database {
  readonly plan: DatabasePlan;
  /** ARN of the secret holding the connection URL. */
  readonly secretArn: $util.Input<string>;
  /** Resources the functions and the migration must wait for. */
  readonly ready: $util.Resource[];
  readonly aurora?: sst.aws.Aurora;
}

/** Creates the Aurora cluster and its URL secret, or refers to the existing database's secret. */
export function createDatabase(plan: DatabasePlan, network: Network): Database {
  if (plan.kind === 'existing') return { plan, secretArn: plan.secretArn, ready: [] };
  const { aurora: settings } = plan;
  const aurora = new sst.aws.Aurora('Database', {
    engine: 'postgres',
    version: settings.version,
    database: 'queuebox',
    vpc: network.functionVpc,
    scaling: {
      min: `${settings.minAcu} ACU`,
      max: `${settings.maxAcu} ACU`,
      ...(settings.minAcu === 0 ? { pauseAfter: `${settings.pauseAfterMinutes} minutes` } : {}),
    },
    // Frozen Lambda environments keep idle connections open, and an open connection keeps Aurora awake.
    ...(settings.idleSessionTimeoutSeconds > 0
      ? {
          transform: {
            clusterParameterGroup: {
              parameters: [
                { name: 'idle_session_timeout', value: String(settings.idleSessionTimeoutSeconds * 1000) },
              ],
            },
          },
        }
      : {}),
  });
  const url: SecretCopy = createDatabaseUrlSecret(
    plan.urlSecretName,
    {
      host: aurora.host,
      port: aurora.port,
      username: aurora.username,
      password: aurora.password,
      database: aurora.database,
    },
    { dependsOn: [aurora] },
  );
  return { plan, secretArn: url.secret.arn, ready: [aurora, url.version], aurora };
}
