import type { AuroraConfig, AwsConfig, QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';

// The database the functions use: Aurora Serverless v2 by default, or an existing one. Pure.

/** The database infra creates in the Aurora cluster. */
export const AURORA_DATABASE_NAME = 'queuebox';

/** The database the functions use. */
export type DatabasePlan =
  | {
      readonly kind: 'aurora';
      readonly provider: 'postgres';
      readonly aurora: AuroraConfig;
      /**
       * How the functions reach it: `data-api` (functions outside any VPC, SQL over HTTPS; the default) or
       * `connection` (functions in the VPC, a `pg` pool on the URL secret).
       */
      readonly access: 'data-api' | 'connection';
      /** Secrets Manager secret infra creates, holding `{"url": …}` (`connection` only). */
      readonly urlSecretName: string;
      /** What the shipped configuration's `database.url` says (`connection` only). */
      readonly url: string;
      readonly schema: string;
    }
  | {
      readonly kind: 'existing';
      readonly provider: 'postgres' | 'sqlserver';
      readonly secretArn: string;
      readonly url: string;
      readonly schema: string;
    };

/**
 * The provider of the database the functions use: postgres for Aurora; for an existing database
 * (`aws.database.secretArn`) `aws.database.provider`, else the `database.provider` written in the file when it is
 * sqlserver, else postgres. Pure.
 */
export function deployDatabaseProvider(
  database: Pick<AwsConfig['database'], 'secretArn' | 'provider'>,
  writtenProvider: string | undefined,
): 'postgres' | 'sqlserver' {
  if (database.secretArn === undefined) return 'postgres';
  if (database.provider !== undefined) return database.provider;
  return writtenProvider === 'sqlserver' ? 'sqlserver' : 'postgres';
}

/** The last part of the name of the secret that holds the Aurora database's URL: `<app>/<stage>/database`. */
export const AURORA_URL_SECRET = 'database';

/** Aurora Serverless v2 PostgreSQL by default; an existing database when `aws.database.secretArn` is set. */
export function planDatabase(
  config: QueueBoxConfig,
  writtenProvider: string | undefined,
  prefix: string,
  inVpc = false,
): DatabasePlan {
  const db = config.aws.database;
  if (db.secretArn !== undefined) {
    return {
      kind: 'existing',
      provider: deployDatabaseProvider(db, writtenProvider),
      secretArn: db.secretArn,
      // urlKey false: the whole secret is an RDS database secret, read as the URL it describes (packages/config).
      url: db.urlKey === false ? `secret://${db.secretArn}` : `secret://${db.secretArn}#${db.urlKey}`,
      schema: config.database.schema,
    };
  }
  const urlSecretName = `${prefix}/${AURORA_URL_SECRET}`;
  return {
    kind: 'aurora',
    provider: 'postgres',
    aurora: db.aurora,
    access: inVpc ? 'connection' : 'data-api',
    urlSecretName,
    url: `secret://${urlSecretName}#url`,
    schema: config.database.schema,
  };
}

/**
 * The connection URL of the Aurora cluster: TLS with the certificate and host name verified (`sslmode=verify-full`).
 * The RDS certificate authorities are not in Node's own list; infra points `NODE_EXTRA_CA_CERTS` at the Lambda
 * runtime's bundle, which holds them (Lambda's Node.js 20+ runtimes no longer load it by default).
 */
export function auroraConnectionUrl(parts: {
  readonly host: string;
  readonly port: number;
  readonly username: string;
  readonly password: string;
  readonly database: string;
}): string {
  const user = encodeURIComponent(parts.username);
  const password = encodeURIComponent(parts.password);
  return `postgres://${user}:${password}@${parts.host}:${parts.port}/${encodeURIComponent(parts.database)}?sslmode=verify-full`;
}

/**
 * The `transform` infra gives `sst.aws.Aurora`: the instance upgrades minor versions automatically (SST's
 * aurora.ts creates it with `autoMinorVersionUpgrade: false`, which would leave the cluster on the minor RDS picked
 * at creation, without its security fixes, until RDS forces an upgrade at the end of that minor's support), and
 * the cluster parameter group sets `idle_session_timeout` (frozen Lambda environments keep idle connections open,
 * and an open connection keeps Aurora awake). SST merges an object transform over its own arguments. Pure.
 */
export function auroraTransform(aurora: Pick<AuroraConfig, 'idleSessionTimeoutSeconds'>) {
  return {
    instance: { autoMinorVersionUpgrade: true },
    ...(aurora.idleSessionTimeoutSeconds > 0
      ? {
          clusterParameterGroup: {
            parameters: [
              { name: 'idle_session_timeout', value: String(aurora.idleSessionTimeoutSeconds * 1000) },
            ],
          },
        }
      : {}),
  };
}

/**
 * Refuses a pinned Aurora minor version (`16.4`): the cluster's instance upgrades minor versions by itself (infra
 * turns `autoMinorVersionUpgrade` on, {@link auroraTransform}; RDS also forces an upgrade when a minor's support
 * ends), after which the pinned version differs from the running one and the next deploy asks RDS for the older
 * version, a downgrade RDS refuses. A major version (`16`) lets RDS pick and upgrade the minor. (Read from SST's
 * aurora.ts and the RDS documentation; not deployed here.)
 */
export function auroraVersionIssues(database: DatabasePlan): ConfigIssue[] {
  if (database.kind !== 'aurora' || !database.aurora.version.includes('.')) return [];
  const major = database.aurora.version.split('.')[0];
  return [
    {
      path: 'aws.database.aurora.version',
      message: `pins the minor version ${database.aurora.version}; Aurora upgrades minor versions itself and the next deploy would try to go back. Give the major version only (${major})`,
    },
  ];
}
