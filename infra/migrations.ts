import * as aws from '@pulumi/aws';
import type * as pulumi from '@pulumi/pulumi';
import type { MigrateEvent } from '@queuebox/deploy-contract';
import { embeddedMigrations, migrationsHash } from '@queuebox/store/migrations';
import type { DatabasePlan } from './database-plan.ts';
import { InfraPlanError } from './errors.ts';

// The migrate function runs once per deploy in which the migrations or the database changed: a Lambda Invocation
// resource whose triggers are the hash of the migrations the bundles embed (the generated modules of the store
// packages, not migrations/*.sql, which a bundle never reads), the schema, and the database's identity (for
// Aurora the cluster's resource id, so a replaced cluster is migrated too). The function compares the hash with
// its own embedded migrations and fails on a difference. A failing migration fails the deploy, before the
// schedules that would query the new tables are (re)created.

/**
 * The hash of the migrations embedded for `provider` (what the migrate function applies and verifies). Throws
 * {@link InfraPlanError} when there are none (the deploy would run the functions against tables that do not exist).
 */
export async function deployedMigrationsHash(provider: DatabasePlan['provider']): Promise<string> {
  const migrations = await embeddedMigrations(provider);
  if (migrations.length === 0) {
    throw new InfraPlanError(`no embedded ${provider} migrations`, { context: { provider } });
  }
  return migrationsHash(migrations);
}

/**
 * What re-runs the invocation: the migrations, the schema they go into, which database it is and, for Aurora,
 * the cluster's identity (`clusterResourceId`, new when the cluster is replaced). Pure.
 */
export function migrationTriggers(
  hash: string,
  database: DatabasePlan,
  cluster?: pulumi.Input<string>,
): Record<string, pulumi.Input<string>> {
  return {
    migrations: hash,
    schema: database.schema,
    database: database.kind === 'aurora' ? `aurora:${database.urlSecretName}` : database.secretArn,
    ...(cluster !== undefined ? { cluster } : {}),
  };
}

/** Invokes `functionName` synchronously on deploy with a {@link MigrateEvent}. */
export function createMigrationRun(args: {
  readonly functionName: pulumi.Input<string>;
  readonly hash: string;
  readonly database: DatabasePlan;
  /** The Aurora cluster's `clusterResourceId`; absent for an existing database. */
  readonly cluster?: pulumi.Input<string>;
  readonly opts?: pulumi.CustomResourceOptions;
}): aws.lambda.Invocation {
  const event: MigrateEvent = { trigger: 'deploy', migrationsHash: args.hash };
  return new aws.lambda.Invocation(
    'MigrateOnDeploy',
    {
      functionName: args.functionName,
      input: JSON.stringify(event),
      triggers: migrationTriggers(args.hash, args.database, args.cluster),
    },
    args.opts,
  );
}
