import * as aws from '@pulumi/aws';
import * as pulumi from '@pulumi/pulumi';
import { auroraConnectionUrl } from './database-plan.ts';
import { InfraPlanError } from './errors.ts';
import type { ManagedSecretPlan } from './secrets-plan.ts';

// The functions resolve `secret://name#key` through Secrets Manager (packages/config), knowing nothing of SST.
// Infra therefore copies each sst.Secret value into a Secrets Manager secret named `<app>/<stage>/<name>` and
// ships a configuration whose references point there: stages stay apart, and `sst secret set` stays the one way
// to set a value.

/** A Secrets Manager secret and its current version. */
export interface SecretCopy {
  readonly secret: aws.secretsmanager.Secret;
  readonly version: aws.secretsmanager.SecretVersion;
}

/** The text stored for a managed secret: the whole value, or a JSON object of its keys. Pure. */
export function secretText(plan: ManagedSecretPlan, values: Readonly<Record<string, string>>): string {
  const read = (sstName: string) => {
    const value = values[sstName];
    if (value === undefined) throw new InfraPlanError(`no value for the secret ${sstName}`);
    return value;
  };
  if (plan.whole) return read(plan.whole.sstName);
  return JSON.stringify(Object.fromEntries(plan.keys.map(({ key, sstName }) => [key, read(sstName)])));
}

/** Days Secrets Manager keeps a deleted secret of a retaining stage before it is gone. */
export const RETAINED_SECRET_RECOVERY_DAYS = 7;

function copy(
  id: string,
  name: string,
  description: string,
  text: pulumi.Input<string>,
  opts: pulumi.CustomResourceOptions,
  recoveryWindowInDays = 0,
): SecretCopy {
  // No recovery window by default: a removed stage can be deployed again under the same names at once.
  const secret = new aws.secretsmanager.Secret(id, { name, description, recoveryWindowInDays }, opts);
  const version = new aws.secretsmanager.SecretVersion(
    `${id}Version`,
    { secretId: secret.id, secretString: pulumi.secret(text) },
    opts,
  );
  return { secret, version };
}

/** One Secrets Manager secret per managed secret, holding the sst.Secret values (`values` by sst.Secret name). */
export function createSecretCopies(
  managed: readonly ManagedSecretPlan[],
  values: Readonly<Record<string, pulumi.Input<string>>>,
  opts: pulumi.CustomResourceOptions = {},
): SecretCopy[] {
  return managed.map((plan) => {
    const names = plan.whole ? [plan.whole.sstName] : plan.keys.map((k) => k.sstName);
    const text = pulumi
      .all(Object.fromEntries(names.map((n) => [n, values[n] ?? ''])))
      .apply((resolved) => secretText(plan, resolved));
    return copy(
      // The name itself keeps the resource stable when other secrets come and go (names are unique).
      `SecretCopy-${plan.name}`,
      plan.secretsManagerName,
      `QueueBox secret://${plan.name}, copied from sst.Secret`,
      text,
      opts,
    );
  });
}

/** The Aurora connection parts as SST's Aurora component exposes them. */
export interface AuroraConnection {
  /** SST types it as possibly undefined (the endpoint before its `:port`); a missing host fails the deploy. */
  readonly host: pulumi.Input<string | undefined>;
  readonly port: pulumi.Input<number>;
  readonly username: pulumi.Input<string>;
  readonly password: pulumi.Input<string>;
  readonly database: pulumi.Input<string>;
}

/**
 * The secret `{"url": "postgres://…"}` the functions read as `database.url`. With `retain` (a stage whose `removal`
 * is not `remove`), the secret outlives `sst remove` like the cluster it opens (`retainOnDelete`), and when it is
 * deleted anyway Secrets Manager keeps it for {@link RETAINED_SECRET_RECOVERY_DAYS} days: the cluster's master
 * password exists nowhere else once the stage's state is gone (SST's own master secret, `DatabaseProxySecret`, is
 * created with no recovery window).
 */
export function createDatabaseUrlSecret(
  name: string,
  connection: AuroraConnection,
  opts: pulumi.CustomResourceOptions = {},
  retain = false,
): SecretCopy {
  const text = pulumi.output(connection).apply(({ host, ...parts }) => {
    if (!host) throw new InfraPlanError(`the Aurora cluster of ${name} has no endpoint`);
    return JSON.stringify({ url: auroraConnectionUrl({ host, ...parts }) });
  });
  return copy(
    'DatabaseUrl',
    name,
    'QueueBox database.url for the Aurora cluster',
    text,
    retain ? { ...opts, retainOnDelete: true } : opts,
    retain ? RETAINED_SECRET_RECOVERY_DAYS : 0,
  );
}
