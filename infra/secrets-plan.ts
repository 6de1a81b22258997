import type { QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import type { ReferenceUse } from './config.ts';
import { componentId } from './functions-plan.ts';

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
): { variables: Record<string, string>; issues: ConfigIssue[] } {
  const variables: Record<string, string> = {};
  const issues: ConfigIssue[] = [];
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
  }
  return { variables, issues };
}
