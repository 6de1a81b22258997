import type { QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import { FUNCTION_ENV, type FunctionName } from '@queuebox/deploy-contract';
import type { ReferenceUse } from './config.ts';
import { AURORA_URL_SECRET } from './database-plan.ts';
import { componentId } from './functions-plan.ts';
import { longestPolicyRefs } from './permissions-plan.ts';
import type { DeployPlan } from './plan.ts';

// The secrets and environment variables the functions read. Pure.

/** One `secret://name` the functions read, kept as an sst.Secret and copied into Secrets Manager. */
export interface ManagedSecretPlan {
  /** The name as written after `secret://`. */
  readonly name: string;
  /** The Secrets Manager name infra creates: `<app>/<stage>/<name>`. */
  readonly secretsManagerName: string;
  /** `#key` references: one sst.Secret per key; the Secrets Manager secret holds their JSON object. */
  readonly keys: readonly { readonly key: string; readonly sstName: string }[];
  /** A reference without `#key`: one sst.Secret holding the whole text. */
  readonly whole?: { readonly sstName: string };
}

/** The secrets the functions read. */
export interface SecretsPlan {
  readonly managed: readonly ManagedSecretPlan[];
  /** Names or ARNs that already exist in Secrets Manager (listed in `aws.secrets.external`, or written as ARNs). */
  readonly external: readonly string[];
  /** Reference text as written → the reference the shipped configuration uses. */
  readonly rewrites: ReadonlyMap<string, string>;
  /** Customer-managed keys of secrets the functions read (`aws.secrets.kmsKeyArns`). */
  readonly kmsKeyArns?: readonly string[];
  /**
   * `<app>/<stage>`, under which every managed copy is named: permissions-plan.ts grants them all with one pattern
   * when no other app or stage can have a secret under it.
   */
  readonly prefix?: string;
}

/** The sst.Secret name for `secret://name[#key]`: PascalCase letters and digits, e.g. `StripeWebhook`. */
export function sstSecretName(name: string, key?: string): string {
  const id = componentId(key === undefined ? name : `${name}-${key}`);
  return /^[A-Z]/.test(id) ? id : `S${id}`;
}

function isUnder(path: readonly (string | number)[], section: string): boolean {
  return path[0] === section;
}

/**
 * Every `secret://` reference outside the database section (infra supplies that one) becomes a managed secret,
 * unless its name is an ARN or listed in `aws.secrets.external`.
 */
export function planSecrets(
  references: readonly ReferenceUse[],
  config: QueueBoxConfig,
  prefix: string,
): { secrets: SecretsPlan; issues: ConfigIssue[] } {
  const { external: listed } = config.aws.secrets;
  const issues: ConfigIssue[] = [];
  const external = new Set<string>();
  const byName = new Map<string, { keys: Set<string>; whole: boolean; paths: string[] }>();
  const rewrites = new Map<string, string>();
  for (const use of references) {
    if (use.reference.kind !== 'secret' || isUnder(use.path, 'database')) continue;
    const { name, jsonKey } = use.reference;
    if (name.startsWith('arn:') || listed.includes(name)) {
      external.add(name);
      continue;
    }
    const entry = byName.get(name) ?? { keys: new Set<string>(), whole: false, paths: [] };
    if (jsonKey === undefined) entry.whole = true;
    else entry.keys.add(jsonKey);
    entry.paths.push(use.path.map(String).join('.'));
    byName.set(name, entry);
    rewrites.set(use.text, `secret://${prefix}/${name}${jsonKey === undefined ? '' : `#${jsonKey}`}`);
  }
  const managed: ManagedSecretPlan[] = [];
  const sstNames = new Map<string, string>();
  const claim = (sstName: string, reference: string) => {
    const other = sstNames.get(sstName.toLowerCase());
    if (other !== undefined && other !== reference) {
      issues.push({
        path: 'secrets',
        message: `secret://${reference} and secret://${other} would both be set as ${sstName}; rename one`,
      });
    }
    sstNames.set(sstName.toLowerCase(), reference);
  };
  for (const [name, entry] of [...byName].sort(([a], [b]) => a.localeCompare(b))) {
    if (name === AURORA_URL_SECRET && config.aws.database.secretArn === undefined) {
      // Its copy would be <app>/<stage>/database, the name of the secret infra makes for Aurora's URL
      // (database-plan.ts): Secrets Manager refuses the second, half-way through the deploy.
      issues.push({
        path: entry.paths[0] ?? 'secrets',
        message: `secret://${name} would be stored as ${prefix}/${name}, the name of the secret that holds the Aurora database's URL; rename it`,
      });
    }
    if (entry.whole && entry.keys.size > 0) {
      issues.push({
        path: entry.paths[0] ?? 'secrets',
        message: `secret://${name} is used both whole and with #key; use one form for a secret`,
      });
    }
    const keys = [...entry.keys].sort().map((key) => {
      const sstName = sstSecretName(name, key);
      claim(sstName, `${name}#${key}`);
      return { key, sstName };
    });
    const whole = entry.whole && entry.keys.size === 0 ? { sstName: sstSecretName(name) } : undefined;
    if (whole) claim(whole.sstName, name);
    managed.push({ name, secretsManagerName: `${prefix}/${name}`, keys, ...(whole ? { whole } : {}) });
  }
  const { kmsKeyArns } = config.aws.secrets;
  return {
    secrets: {
      managed,
      external: [...external].sort(),
      rewrites,
      ...(kmsKeyArns.length > 0 ? { kmsKeyArns: [...kmsKeyArns] } : {}),
      prefix,
    },
    issues,
  };
}

const RESERVED_LAMBDA_ENV = /^(AWS_|LAMBDA_|_HANDLER$|_X_AMZN_TRACE_ID$|TZ$)/;

/**
 * `env://NAME` references outside the database section: the deploying environment must hold them, and each
 * becomes an environment variable of every function.
 */
export function planEnvironment(
  references: readonly ReferenceUse[],
  env: Readonly<Record<string, string | undefined>>,
): { variables: Record<string, string>; issues: ConfigIssue[]; paths: Record<string, string> } {
  const variables: Record<string, string> = {};
  const issues: ConfigIssue[] = [];
  /** The first path referring to each variable. */
  const paths: Record<string, string> = {};
  for (const use of references) {
    if (use.reference.kind !== 'env' || isUnder(use.path, 'database')) continue;
    const name = use.reference.name;
    const path = use.path.map(String).join('.');
    if (RESERVED_LAMBDA_ENV.test(name) || name.startsWith('QUEUEBOX_')) {
      issues.push({
        path,
        message: `refers to ${name}, which Lambda reserves or QueueBox reads as configuration; use another variable or secret://`,
      });
      continue;
    }
    const value = env[name];
    if (value === undefined) {
      issues.push({
        path,
        message: `refers to ${name}, which is not set where sst deploy runs (infra passes it to the functions)`,
      });
      continue;
    }
    variables[name] = value;
    paths[name] ??= path;
  }
  return { variables, issues, paths };
}

/**
 * What Lambda allows all the environment variables of one function together: "4 KB, for all environment variables
 * associated with the function, in aggregate" (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html,
 * not adjustable), measured on their JSON (its refusal reads "…exceeded the 4KB limit. String measured:
 * {"NAME":"value",…}", e.g. https://github.com/github-aws-runners/terraform-aws-github-runner/issues/3594).
 */
export const LAMBDA_ENVIRONMENT_MAX_BYTES = 4096;

/** The bytes Lambda measures for `variables`: their JSON, UTF-8. */
export function environmentBytes(variables: Readonly<Record<string, string>>): number {
  return Buffer.byteLength(JSON.stringify(variables), 'utf8');
}

/**
 * The variables one function gets at deploy besides `plan.environment`, at their longest plausible values (the ARNs
 * of permissions-plan.ts `longestPolicyRefs`): the Data API's cluster and secret ARNs (functions.ts), the names of
 * the functions it wakes (64 characters, Lambda's maximum), the deferred-tick schedule group and scheduler role ARN,
 * and what SST adds to every function (SST 4.17 function.ts: `SST_RESOURCE_App` `{"name","stage"}`, `SST_KEY` the
 * base64 of 32 random bytes, `SST_KEY_FILE`; `sst dev` adds more, not counted).
 */
export function deployTimeVariables(
  plan: Pick<
    DeployPlan,
    'app' | 'stage' | 'service' | 'functions' | 'wakeups' | 'deferredTicks' | 'database'
  > &
    Partial<Pick<DeployPlan, 'sourceCheck'>> & {
      readonly secrets: Pick<SecretsPlan, 'managed'>;
    },
  fn: FunctionName,
): Record<string, string> {
  const refs = longestPolicyRefs(plan);
  const variables: Record<string, string> = {};
  if (refs.databaseClusterArn !== undefined) {
    variables[FUNCTION_ENV.databaseClusterArn] = refs.databaseClusterArn;
    variables[FUNCTION_ENV.databaseSecretArn] = refs.databaseSecretArn;
  }
  for (const wakeup of plan.wakeups.filter((w) => w.from === fn)) variables[wakeup.env] = 'f'.repeat(64);
  if (plan.deferredTicks.includes(fn) && refs.scheduleGroupName && refs.schedulerRoleArn) {
    variables[FUNCTION_ENV.wakeScheduleGroup] = refs.scheduleGroupName;
    variables[FUNCTION_ENV.wakeSchedulerRoleArn] = refs.schedulerRoleArn;
  }
  if (fn === 'source-check' && plan.sourceCheck !== undefined) {
    for (const target of plan.sourceCheck.targets) variables[target.env] = 'f'.repeat(64);
    variables[FUNCTION_ENV.disabledSourceMappings] = plan.sourceCheck.disabledMappings;
  }
  variables.SST_RESOURCE_App = JSON.stringify({ name: plan.app, stage: plan.stage });
  variables.SST_KEY = Buffer.alloc(32).toString('base64');
  variables.SST_KEY_FILE = 'resource.enc';
  return variables;
}

/**
 * Every function's variables (`plan.environment` and {@link deployTimeVariables}) against
 * {@link LAMBDA_ENVIRONMENT_MAX_BYTES}: one issue naming the functions over it, at the first `env://` reference,
 * since those are what grows (each becomes a variable of every function). `paths` from {@link planEnvironment}.
 */
export function planEnvironmentSizes(
  plan: Parameters<typeof deployTimeVariables>[0] & Pick<DeployPlan, 'environment'>,
  paths: Readonly<Record<string, string>>,
): { sizes: Partial<Record<FunctionName, number>>; issues: ConfigIssue[] } {
  const sizes: Partial<Record<FunctionName, number>> = {};
  for (const fn of plan.functions) {
    sizes[fn.name] = environmentBytes({ ...plan.environment, ...deployTimeVariables(plan, fn.name) });
  }
  const over = plan.functions.filter((f) => (sizes[f.name] ?? 0) > LAMBDA_ENVIRONMENT_MAX_BYTES);
  if (over.length === 0) return { sizes, issues: [] };
  const largest = Math.max(...over.map((f) => sizes[f.name] ?? 0));
  const referenced = Object.keys(paths).filter((name) => plan.environment[name] !== undefined);
  const referencedBytes = referenced.reduce(
    (n, name) => n + environmentBytes({ [name]: plan.environment[name] ?? '' }) - 2,
    0,
  );
  const largestFirst = [...referenced].sort(
    (a, b) => (plan.environment[b] ?? '').length - (plan.environment[a] ?? '').length,
  );
  const named = `${largestFirst.slice(0, 5).join(', ')}${referenced.length > 5 ? `, and ${referenced.length - 5} more` : ''}`;
  return {
    sizes,
    issues: [
      {
        path: referenced.map((name) => paths[name]).find((p) => p !== undefined) ?? 'env://',
        message: `the environment variables of ${over.map((f) => f.name).join(', ')} would be up to ${largest.toLocaleString('en-US')} bytes (their JSON, with the ARNs and names set at deploy at their longest), over Lambda's 4 KB (${LAMBDA_ENVIRONMENT_MAX_BYTES.toLocaleString('en-US')} bytes) for all of a function's variables: the deploy would fail. The ${referenced.length} env:// variable(s) (${named}) take ${referencedBytes.toLocaleString('en-US')} bytes, in every function: write secret://name#key for them instead (infra keeps the values in Secrets Manager; npx sst secret set), or shorten them.`,
      },
    ],
  };
}
