import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as aws from '@pulumi/aws';
import type * as pulumi from '@pulumi/pulumi';
import type { MigrateEvent } from './contract.ts';
import type { DatabasePlan } from './database-plan.ts';
import { InfraPlanError } from './errors.ts';

// The migrate function runs once per deploy in which the migrations changed: a Lambda Invocation resource whose
// trigger is a hash of migrations/<provider>/*.sql (and of the target database). A failing migration fails the
// deploy, before the schedules that would query the new tables are (re)created.

/**
 * SHA-256 over the names and contents of `<dir>/*.sql`, in name order. Throws {@link InfraPlanError} when the
 * directory holds no migration (the deploy would run the functions against tables that do not exist).
 */
export function migrationsHash(dir: string): string {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((name) => name.endsWith('.sql'))
      .sort();
  } catch (cause) {
    throw new InfraPlanError(`cannot read the migrations in ${dir}`, { cause, context: { dir } });
  }
  if (names.length === 0) throw new InfraPlanError(`no migrations (*.sql) in ${dir}`, { context: { dir } });
  const hash = createHash('sha256');
  for (const name of names) {
    hash
      .update(name)
      .update('\0')
      .update(readFileSync(join(dir, name)))
      .update('\0');
  }
  return hash.digest('hex');
}

/** The migrations directory of a database's provider under the project root. */
export function migrationsDir(root: string, database: Pick<DatabasePlan, 'provider'>): string {
  return join(root, 'migrations', database.provider);
}

/** What re-runs the invocation: the migrations, the schema they go into, and which database it is. Pure. */
export function migrationTriggers(hash: string, database: DatabasePlan): Record<string, string> {
  return {
    migrations: hash,
    schema: database.schema,
    database: database.kind === 'aurora' ? `aurora:${database.urlSecretName}` : database.secretArn,
  };
}

/** Invokes `functionName` synchronously on deploy with a {@link MigrateEvent}. */
export function createMigrationRun(args: {
  readonly functionName: pulumi.Input<string>;
  readonly hash: string;
  readonly database: DatabasePlan;
  readonly opts?: pulumi.CustomResourceOptions;
}): aws.lambda.Invocation {
  const event: MigrateEvent = { trigger: 'deploy', migrationsHash: args.hash };
  return new aws.lambda.Invocation(
    'MigrateOnDeploy',
    {
      functionName: args.functionName,
      input: JSON.stringify(event),
      triggers: migrationTriggers(args.hash, args.database),
    },
    args.opts,
  );
}
