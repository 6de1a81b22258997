import type {
  AuroraConfig,
  AwsConfig,
  AwsFunctionsConfig,
  AwsSourceConfig,
  BrokerAuthType,
  QueueBoxConfig,
} from '@queuebox/config';
import { ConfigError, type ConfigIssue, QueueBoxError } from '@queuebox/core';
import type { DeployConfig, ReferenceUse } from './config.ts';
import {
  FUNCTION_CONFIG_PATH,
  FUNCTION_ENV,
  FUNCTION_NAMES,
  type FunctionName,
  handlerOf,
  METRIC_NAMESPACE,
  METRICS,
  SERVICE_DIMENSION,
  TABLE_DIMENSION,
  TABLES,
} from './contract.ts';

// Everything infra creates is decided here, from the validated configuration, by pure functions: the SST and
// Pulumi code in the other files only applies the plan. Tests exercise these functions without SST.

/** A planning invariant was broken (a bug, or a configuration that validation should have refused). */
export class InfraPlanError extends QueueBoxError {}

// ---------------------------------------------------------------------------------------------------------------
// functions

/** One Lambda function to create. */
export interface FunctionPlan {
  readonly name: FunctionName;
  /** SST component name, e.g. `OutboxTick`. */
  readonly id: string;
  /** `functions/<name>.handler`. */
  readonly handler: string;
  /** Its key under `aws.functions`. */
  readonly configKey: keyof AwsFunctionsConfig;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** Minutes between scheduled runs (ticks only). */
  readonly rateMinutes?: number;
  /** Lease of the claims it takes, in ms (outbox-tick, relay-tick); always above the timeout. */
  readonly claimLeaseMs?: number;
  /** Why the function exists in this install. */
  readonly reason: string;
}

const CONFIG_KEYS: Readonly<Record<FunctionName, keyof AwsFunctionsConfig>> = {
  'outbox-tick': 'outboxTick',
  'relay-tick': 'relayTick',
  'maintenance-tick': 'maintenanceTick',
  migrate: 'migrate',
  'nats-source-tick': 'natsSourceTick',
  'kafka-source': 'kafkaSource',
  'amqp-source': 'amqpSource',
  'inbox-http': 'inboxHttp',
  'admin-http': 'adminHttp',
};

const TICKS: readonly FunctionName[] = ['outbox-tick', 'relay-tick', 'maintenance-tick', 'nats-source-tick'];

/** `outbox-tick` → `OutboxTick`. */
export function componentId(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .filter((part) => part !== '')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

function sourcesOf<T extends QueueBoxConfig['sources'][string]['type']>(config: QueueBoxConfig, type: T) {
  return Object.entries(config.sources).filter(
    (e): e is [string, Extract<QueueBoxConfig['sources'][string], { type: T }>] => e[1].type === type,
  );
}

/** Why each function exists, or `undefined` when this configuration does not need it. */
function reasonFor(name: FunctionName, config: QueueBoxConfig): string | undefined {
  const sources = Object.values(config.sources);
  switch (name) {
    case 'outbox-tick':
      return 'delivers outbox rows (always)';
    case 'maintenance-tick':
      return 'retention clean-up and the dead-row / oldest-pending gauges (always)';
    case 'migrate':
      return 'applies migrations on deploy (always)';
    case 'admin-http':
      return 'admin API and /health (always)';
    case 'relay-tick':
      if (!config.inbox.relay.enabled) return undefined;
      return sources.some((s) => s.mode === 'push') ? 'forwards push-source inbox rows' : undefined;
    case 'inbox-http':
      return sources.some((s) => s.type === 'http') ? 'receives the HTTP sources' : undefined;
    case 'kafka-source':
      return sources.some((s) => s.type === 'kafka') ? 'consumes the Kafka sources' : undefined;
    case 'amqp-source':
      return sources.some((s) => s.type === 'amqp') ? 'consumes the AMQP sources' : undefined;
    case 'nats-source-tick':
      return sources.some((s) => s.type === 'nats') ? 'pulls the NATS sources' : undefined;
  }
}

/**
 * The functions this configuration needs, in {@link FUNCTION_NAMES} order, with timeouts, memory and rates from
 * `aws.functions`. Throws {@link InfraPlanError} when a claiming function's timeout does not stay below its claim
 * lease (validation refuses such a configuration; this guards the plan against a validation gap).
 */
export function planFunctions(config: QueueBoxConfig): FunctionPlan[] {
  const leases: Partial<Record<FunctionName, number>> = {
    'outbox-tick': config.outbox.claimTimeoutMs,
    'relay-tick': config.inbox.relay.claimTimeoutMs,
  };
  const plans: FunctionPlan[] = [];
  for (const name of FUNCTION_NAMES) {
    const reason = reasonFor(name, config);
    if (reason === undefined) continue;
    const configKey = CONFIG_KEYS[name];
    const settings = config.aws.functions[configKey];
    const rateMinutes = 'rateMinutes' in settings ? settings.rateMinutes : undefined;
    const claimLeaseMs = leases[name];
    if (claimLeaseMs !== undefined && settings.timeoutSeconds * 1000 >= claimLeaseMs) {
      throw new InfraPlanError(
        `${name} would run up to ${settings.timeoutSeconds} s but its claims last ${claimLeaseMs} ms: a claim must outlive the function holding it`,
        { context: { function: name, timeoutSeconds: settings.timeoutSeconds, claimLeaseMs } },
      );
    }
    plans.push({
      name,
      id: componentId(name),
      handler: handlerOf(name),
      configKey,
      timeoutSeconds: settings.timeoutSeconds,
      memoryMb: settings.memoryMb,
      ...(TICKS.includes(name) && rateMinutes !== undefined ? { rateMinutes } : {}),
      ...(claimLeaseMs !== undefined ? { claimLeaseMs } : {}),
      reason,
    });
  }
  return plans;
}

/**
 * How SST's esbuild bundles every function; scripts/check-bundles.ts and bench/lambda.ts bundle with the same
 * settings and plugins. `@aws-sdk/*` comes from the nodejs24.x runtime. `pg-native` and `cpu-features` are optional
 * natives the drivers only load on request; listing them here also stops SST from npm-installing `pg-native` into
 * the package. `@electric-sql/pglite` (the embedded database of the local runtime and the tests, ≈ 0.5 MB) is never
 * used on Lambda: store-postgres imports it dynamically, only for `database.provider: pglite`, so leaving it out
 * costs nothing there. `keepNames` is SST's default, stated because QueueBox's errors take their `name` from their
 * class. `plugins` (loaded by SST with plain `node`) replaces `@azure/identity` and `iconv-lite` for tedious with
 * small modules of ours (functions/bundle/aliases.ts; ≈ 1 MB less in every bundle, at the price of Azure AD sign-in
 * to SQL Server and of CHAR/VARCHAR data in CP437, CP850 and CP949, which QueueBox neither uses nor documents),
 * and `import`s of node:http by the module taken with require() (≈ 30 ms less cold start on Node 24).
 */
export const FUNCTION_BUNDLE = {
  runtime: 'nodejs24.x',
  architecture: 'arm64',
  format: 'esm',
  minify: true,
  sourcemap: true,
  keepNames: true,
  external: ['@aws-sdk/*', 'pg-native', 'cpu-features', '@electric-sql/pglite'],
  /** A module whose default export lists esbuild plugins, relative to the repository root (SST's `nodejs.plugins`). */
  plugins: 'functions/bundle/sst-plugins.ts',
} as const;

/** The `nodejs` argument of every `sst.aws.Function`: {@link FUNCTION_BUNDLE} in SST's words. */
export function functionBundleArgs() {
  return {
    format: FUNCTION_BUNDLE.format,
    minify: FUNCTION_BUNDLE.minify,
    sourcemap: FUNCTION_BUNDLE.sourcemap,
    plugins: FUNCTION_BUNDLE.plugins,
    esbuild: { external: [...FUNCTION_BUNDLE.external], keepNames: FUNCTION_BUNDLE.keepNames },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// API

/** One API Gateway route. */
export interface RoutePlan {
  /** `METHOD /path` as API Gateway HTTP APIs write it. */
  readonly route: string;
  readonly function: FunctionName;
  readonly auth: 'none' | 'iam';
}

/** A stack output with the full webhook URL of one HTTP source. */
export interface WebhookPlan {
  readonly source: string;
  /** Path under the API's URL, e.g. `/inbox/stripe`. */
  readonly path: string;
  /** Stack output name, `webhook-<source>`. */
  readonly output: string;
}

/** The API's routes and the webhook outputs, one per HTTP source. */
export function planRoutes(config: QueueBoxConfig): { routes: RoutePlan[]; webhooks: WebhookPlan[] } {
  const basePath = config.inbox.basePath;
  const http = sourcesOf(config, 'http');
  const routes: RoutePlan[] = [];
  if (http.length > 0)
    routes.push({ route: `POST ${basePath}/{source}`, function: 'inbox-http', auth: 'none' });
  routes.push({ route: 'ANY /admin/{proxy+}', function: 'admin-http', auth: 'iam' });
  routes.push({ route: 'GET /health', function: 'admin-http', auth: 'none' });
  const webhooks = http
    .map(([name, source]) => ({
      source: name,
      path: `${basePath}/${source.path}`,
      output: `webhook-${name}`,
    }))
    .sort((a, b) => a.source.localeCompare(b.source));
  return { routes, webhooks };
}

/** The full URL of a route path on an API whose base URL may or may not end with `/`. */
export function webhookUrl(apiUrl: string, path: string): string {
  return `${apiUrl.replace(/\/+$/, '')}${path}`;
}

// ---------------------------------------------------------------------------------------------------------------
// schedules

/** One EventBridge schedule of a tick. */
export interface SchedulePlan {
  readonly id: string;
  readonly function: FunctionName;
  readonly rateMinutes: number;
  /** `rate(1 minute)`, `cron(0/15 * * * ? *)`, `rate(7 minutes)`. */
  readonly expression: `rate(${string})` | `cron(${string})`;
}

/**
 * The EventBridge expression for a tick every `minutes`. Rates that divide an hour (or a day, in whole hours) become
 * cron expressions on wall-clock boundaries, so ticks with equal rates fire in the same minute and a pausable
 * database wakes once for all of them instead of once per schedule; other rates stay `rate(…)`.
 */
export function scheduleExpression(minutes: number): `rate(${string})` | `cron(${string})` {
  if (!Number.isInteger(minutes) || minutes < 1) {
    throw new InfraPlanError(
      `a schedule rate must be a whole number of minutes, at least 1 (got ${minutes})`,
    );
  }
  if (minutes === 1) return 'rate(1 minute)';
  if (minutes < 60 && 60 % minutes === 0) return `cron(0/${minutes} * * * ? *)`;
  if (minutes === 60) return 'cron(0 * * * ? *)';
  if (minutes === 1440) return 'cron(0 0 * * ? *)';
  if (minutes % 60 === 0 && 1440 % minutes === 0) return `cron(0 0/${minutes / 60} * * ? *)`;
  return `rate(${minutes} minutes)`;
}

/** One schedule per planned tick function, at its `aws.functions.<tick>.rateMinutes`. */
export function planSchedules(functions: readonly FunctionPlan[]): SchedulePlan[] {
  return functions
    .filter((f): f is FunctionPlan & { rateMinutes: number } => f.rateMinutes !== undefined)
    .map((f) => ({
      id: `${f.id}Schedule`,
      function: f.name,
      rateMinutes: f.rateMinutes,
      expression: scheduleExpression(f.rateMinutes),
    }));
}

// ---------------------------------------------------------------------------------------------------------------
// broker triggers

interface TriggerCommon {
  /** Pulumi resource name. */
  readonly id: string;
  readonly source: string;
  readonly batchSize: number;
  readonly batchWindowSeconds: number;
  readonly enabled: boolean;
  readonly auth: { readonly type: BrokerAuthType; readonly secretArn?: string };
}

/** An event source mapping on an MSK cluster (one per topic: Lambda maps one topic per mapping). */
export interface MskTriggerPlan extends TriggerCommon {
  readonly kind: 'msk';
  readonly function: 'kafka-source';
  readonly clusterArn: string;
  readonly topic: string;
  readonly consumerGroupId: string;
  readonly startingPosition: 'LATEST' | 'TRIM_HORIZON';
}

/** An event source mapping on self-managed Kafka (the source's `brokers`), one per topic. */
export interface SelfManagedKafkaTriggerPlan extends TriggerCommon {
  readonly kind: 'self-managed-kafka';
  readonly function: 'kafka-source';
  readonly bootstrapServers: readonly string[];
  readonly topic: string;
  readonly consumerGroupId: string;
  readonly startingPosition: 'LATEST' | 'TRIM_HORIZON';
  /** Poll from the install's private subnets. */
  readonly inVpc: boolean;
}

/** An event source mapping on an Amazon MQ for RabbitMQ queue. */
export interface AmazonMqTriggerPlan extends TriggerCommon {
  readonly kind: 'amazon-mq';
  readonly function: 'amqp-source';
  readonly brokerArn: string;
  readonly queue: string;
  readonly virtualHost: string;
}

/** Any planned event source mapping, discriminated by `kind`. */
export type BrokerTriggerPlan = MskTriggerPlan | SelfManagedKafkaTriggerPlan | AmazonMqTriggerPlan;

const DEFAULT_SOURCE_SETTINGS: AwsSourceConfig = {
  virtualHost: '/',
  batchSize: 100,
  batchWindowSeconds: 0,
  startingPosition: 'LATEST',
  enabled: true,
  inVpc: true,
};

const AUTH_ALLOWED: Readonly<Record<BrokerTriggerPlan['kind'], readonly BrokerAuthType[]>> = {
  msk: ['iam', 'sasl-scram-512', 'mtls'],
  'self-managed-kafka': ['none', 'sasl-scram-512', 'sasl-scram-256', 'sasl-plain', 'mtls'],
  'amazon-mq': ['basic'],
};

const AUTH_DEFAULT: Readonly<Record<BrokerTriggerPlan['kind'], BrokerAuthType>> = {
  msk: 'iam',
  'self-managed-kafka': 'none',
  'amazon-mq': 'basic',
};

function authFor(
  kind: BrokerTriggerPlan['kind'],
  settings: AwsSourceConfig,
  path: string,
  issues: ConfigIssue[],
): TriggerCommon['auth'] {
  const type = settings.auth?.type ?? AUTH_DEFAULT[kind];
  const secretArn = settings.auth?.secretArn;
  if (!AUTH_ALLOWED[kind].includes(type)) {
    issues.push({
      path: `${path}.auth.type`,
      message: `"${type}" does not work for ${kind}; use one of ${AUTH_ALLOWED[kind].join(', ')}`,
    });
  }
  const needsSecret = type !== 'none' && type !== 'iam';
  if (needsSecret && secretArn === undefined) {
    issues.push({
      path: `${path}.auth.secretArn`,
      message: `is required: ${kind} authentication "${type}" reads its credentials from a Secrets Manager secret`,
    });
  }
  return secretArn !== undefined && needsSecret ? { type, secretArn } : { type };
}

/**
 * Event source mappings for the Kafka and AMQP sources the configuration declares, with their `aws.sources.<name>`
 * settings. Problems (an AMQP source without an Amazon MQ broker, a wrong auth type, settings for a source that
 * does not exist, two sources on one topic or queue) come back as issues.
 */
export function planBrokerTriggers(config: QueueBoxConfig): {
  triggers: BrokerTriggerPlan[];
  issues: ConfigIssue[];
} {
  const issues: ConfigIssue[] = [];
  const triggers: BrokerTriggerPlan[] = [];
  const { sources: awsSources } = config.aws;
  for (const [name, own] of Object.entries(awsSources)) {
    const source = config.sources[name];
    const path = `aws.sources.${name}`;
    if (source === undefined || (source.type !== 'kafka' && source.type !== 'amqp')) {
      issues.push({
        path,
        message:
          source === undefined
            ? 'names no configured source'
            : `is for a ${source.type} source; only kafka and amqp sources have event source mappings`,
      });
      continue;
    }
    if (source.type === 'kafka' && own.mqBrokerArn !== undefined) {
      issues.push({ path: `${path}.mqBrokerArn`, message: 'is for AMQP sources; this source is kafka' });
    }
    if (source.type === 'amqp' && own.mskClusterArn !== undefined) {
      issues.push({ path: `${path}.mskClusterArn`, message: 'is for Kafka sources; this source is amqp' });
    }
  }

  const kafkaTopics = new Map<string, string>();
  for (const [name, source] of sourcesOf(config, 'kafka')) {
    const own = awsSources[name] ?? DEFAULT_SOURCE_SETTINGS;
    const path = `aws.sources.${name}`;
    const kind = own.mskClusterArn !== undefined ? 'msk' : 'self-managed-kafka';
    const auth = authFor(kind, own, path, issues);
    for (const topic of source.topics) {
      const other = kafkaTopics.get(topic);
      if (other !== undefined) {
        issues.push({
          path: `sources.${name}.topics`,
          message: `consumes the topic "${topic}", which the source "${other}" also consumes; kafka-source tells sources apart by topic`,
        });
        continue;
      }
      kafkaTopics.set(topic, name);
      const groupId = source.groupId ?? `queuebox-${name}`;
      const common = {
        id: `${componentId(name)}${componentId(topic)}Trigger`,
        source: name,
        function: 'kafka-source' as const,
        topic,
        // Lambda wants a consumer group per mapping; with several topics each mapping gets its own.
        consumerGroupId: source.topics.length === 1 ? groupId : `${groupId}.${topic}`,
        startingPosition: own.startingPosition,
        batchSize: own.batchSize,
        batchWindowSeconds: own.batchWindowSeconds,
        enabled: own.enabled,
        auth,
      };
      triggers.push(
        own.mskClusterArn !== undefined
          ? { ...common, kind: 'msk', clusterArn: own.mskClusterArn }
          : {
              ...common,
              kind: 'self-managed-kafka',
              bootstrapServers: [...source.brokers],
              inVpc: own.inVpc,
            },
      );
    }
  }

  const queues = new Map<string, string>();
  for (const [name, source] of sourcesOf(config, 'amqp')) {
    const own = awsSources[name];
    const path = `aws.sources.${name}`;
    if (own?.mqBrokerArn === undefined) {
      issues.push({
        path: `${path}.mqBrokerArn`,
        message:
          'is required: Lambda consumes RabbitMQ only from Amazon MQ; give the broker ARN and { auth: { type: basic, secretArn } }',
      });
      continue;
    }
    const queue = source.queue;
    const other = queues.get(queue);
    if (other !== undefined) {
      issues.push({
        path: `sources.${name}.queue`,
        message: `is "${queue}", which the source "${other}" also consumes; amqp-source tells sources apart by queue`,
      });
      continue;
    }
    queues.set(queue, name);
    triggers.push({
      kind: 'amazon-mq',
      id: `${componentId(name)}Trigger`,
      source: name,
      function: 'amqp-source',
      brokerArn: own.mqBrokerArn,
      queue,
      virtualHost: own.virtualHost,
      batchSize: own.batchSize,
      batchWindowSeconds: own.batchWindowSeconds,
      enabled: own.enabled,
      auth: authFor('amazon-mq', own, path, issues),
    });
  }
  return { triggers, issues };
}

// ---------------------------------------------------------------------------------------------------------------
// secrets and environment

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
  return { secrets: { managed, external: [...external].sort(), rewrites }, issues };
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

// ---------------------------------------------------------------------------------------------------------------
// database and network

/** The database the functions use. */
export type DatabasePlan =
  | {
      readonly kind: 'aurora';
      readonly provider: 'postgres';
      readonly aurora: AuroraConfig;
      /** Secrets Manager secret infra creates, holding `{"url": …}`. */
      readonly urlSecretName: string;
      /** What the shipped configuration's `database.url` says. */
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

/** Aurora Serverless v2 PostgreSQL by default; an existing database when `aws.database.secretArn` is set. */
export function planDatabase(
  config: QueueBoxConfig,
  writtenProvider: string | undefined,
  prefix: string,
): DatabasePlan {
  const db = config.aws.database;
  if (db.secretArn !== undefined) {
    return {
      kind: 'existing',
      provider: deployDatabaseProvider(db, writtenProvider),
      secretArn: db.secretArn,
      url: `secret://${db.secretArn}#${db.urlKey}`,
      schema: config.database.schema,
    };
  }
  const urlSecretName = `${prefix}/database`;
  return {
    kind: 'aurora',
    provider: 'postgres',
    aurora: db.aurora,
    urlSecretName,
    url: `secret://${urlSecretName}#url`,
    schema: config.database.schema,
  };
}

/**
 * The connection URL of the Aurora cluster. TLS without certificate verification: the RDS CA is not in Node's
 * trust store, and the traffic never leaves the VPC.
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
  return `postgres://${user}:${password}@${parts.host}:${parts.port}/${encodeURIComponent(parts.database)}?sslmode=no-verify`;
}

/** Where the functions run. */
export type NetworkPlan =
  | { readonly kind: 'create'; readonly nat: 'ec2' | 'managed'; readonly azs: number }
  | {
      readonly kind: 'existing';
      readonly privateSubnetIds: readonly string[];
      readonly securityGroupIds: readonly string[];
    };

/** A new VPC with NAT (default: fck-nat EC2 instances), or existing subnets. */
export function planNetwork(
  config: QueueBoxConfig,
  database: DatabasePlan,
): { network: NetworkPlan; issues: ConfigIssue[] } {
  const net = config.aws.network;
  const issues: ConfigIssue[] = [];
  if (net.existing !== undefined) {
    if (database.kind === 'aurora' && net.existing.privateSubnetIds.length < 2) {
      issues.push({
        path: 'aws.network.existing.privateSubnetIds',
        message: 'lists one subnet; Aurora needs subnets in at least two availability zones',
      });
    }
    return {
      network: {
        kind: 'existing',
        privateSubnetIds: net.existing.privateSubnetIds,
        securityGroupIds: net.existing.securityGroupIds,
      },
      issues,
    };
  }
  if (net.nat === 'none') {
    issues.push({
      path: 'aws.network.nat',
      message:
        'is none, but the functions of a new VPC need NAT to reach Secrets Manager, Lambda and your destinations; use ec2 or managed, or aws.network.existing',
    });
    return { network: { kind: 'create', nat: 'ec2', azs: net.azs }, issues };
  }
  return { network: { kind: 'create', nat: net.nat, azs: net.azs }, issues };
}

// ---------------------------------------------------------------------------------------------------------------
// wake-ups

/** A function that may invoke another asynchronously, and the variable carrying the target's name. */
export interface WakeupPlan {
  readonly from: FunctionName;
  readonly to: FunctionName;
  readonly env: string;
}

/**
 * Asynchronous wake-ups: whatever stores push rows wakes relay-tick; relay-tick and admin-http (requeue) wake
 * outbox-tick; admin-http also wakes relay-tick (requeued inbox rows). Only between planned functions.
 */
export function planWakeups(functions: readonly FunctionPlan[]): WakeupPlan[] {
  const present = new Set(functions.map((f) => f.name));
  const edges: WakeupPlan[] = [];
  const add = (from: FunctionName, to: FunctionName, env: string) => {
    if (present.has(from) && present.has(to)) edges.push({ from, to, env });
  };
  for (const from of [
    'inbox-http',
    'kafka-source',
    'amqp-source',
    'nats-source-tick',
    'admin-http',
  ] as const) {
    add(from, 'relay-tick', FUNCTION_ENV.relayTickFunction);
  }
  add('relay-tick', 'outbox-tick', FUNCTION_ENV.outboxTickFunction);
  add('admin-http', 'outbox-tick', FUNCTION_ENV.outboxTickFunction);
  return edges;
}

/** Functions that book one-shot EventBridge Scheduler invocations of themselves for rows scheduled later. */
export function planDeferredTicks(functions: readonly FunctionPlan[]): FunctionName[] {
  return functions.filter((f) => f.name === 'outbox-tick' || f.name === 'relay-tick').map((f) => f.name);
}

// ---------------------------------------------------------------------------------------------------------------
// alarms

/** A CloudWatch alarm to create. */
export interface AlarmPlan {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly namespace: string;
  readonly metricName: string;
  /** Fixed dimensions; `FunctionName` is added from {@link function} when set. */
  readonly dimensions: Readonly<Record<string, string>>;
  readonly function?: FunctionName;
  readonly statistic: 'Maximum' | 'Sum';
  readonly periodSeconds: number;
  readonly evaluationPeriods: number;
  readonly threshold: number;
  readonly comparisonOperator: 'GreaterThanThreshold';
  readonly treatMissingData: 'missing' | 'notBreaching';
}

/** Alarms plus the notification topic's email subscribers. */
export interface AlarmsPlan {
  readonly topicName: string;
  readonly emails: readonly string[];
  readonly alarms: readonly AlarmPlan[];
}

/**
 * Dead rows > 0 and oldest pending age over `aws.alarms.oldestPendingAgeSeconds`, per table, from the gauges
 * maintenance-tick publishes (period: its rate, so each period holds one run); errors of each function but
 * migrate (a failing migration fails the deploy instead).
 */
export function planAlarms(
  config: QueueBoxConfig,
  functions: readonly FunctionPlan[],
  names: { readonly prefix: string; readonly service: string },
): AlarmsPlan {
  const gaugePeriod = Math.min(86_400, config.aws.functions.maintenanceTick.rateMinutes * 60);
  const alarms: AlarmPlan[] = [];
  for (const table of TABLES) {
    const gauge = (metricName: string, threshold: number) => ({
      namespace: METRIC_NAMESPACE,
      metricName,
      dimensions: { [SERVICE_DIMENSION]: names.service, [TABLE_DIMENSION]: table },
      statistic: 'Maximum' as const,
      periodSeconds: gaugePeriod,
      evaluationPeriods: 1,
      threshold,
      comparisonOperator: 'GreaterThanThreshold' as const,
      // The gauge arrives once per maintenance run; a late run must not flip the state.
      treatMissingData: 'missing' as const,
    });
    alarms.push({
      id: `DeadRows${componentId(table)}Alarm`,
      name: `${names.prefix}-dead-rows-${table}`,
      description: `QueueBox ${names.service}: ${table} has dead rows (they need a requeue or a look).`,
      ...gauge(METRICS.deadRows, 0),
    });
    alarms.push({
      id: `OldestPending${componentId(table)}Alarm`,
      name: `${names.prefix}-oldest-pending-${table}`,
      description: `QueueBox ${names.service}: the oldest due pending ${table} row is older than ${config.aws.alarms.oldestPendingAgeSeconds} s.`,
      ...gauge(METRICS.oldestPendingAge, config.aws.alarms.oldestPendingAgeSeconds),
    });
  }
  for (const fn of functions) {
    if (fn.name === 'migrate') continue;
    alarms.push({
      id: `${fn.id}ErrorsAlarm`,
      name: `${names.prefix}-errors-${fn.name}`,
      description: `QueueBox ${names.service}: ${fn.name} failed.`,
      namespace: 'AWS/Lambda',
      metricName: 'Errors',
      dimensions: {},
      function: fn.name,
      statistic: 'Sum',
      periodSeconds: 300,
      evaluationPeriods: 1,
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
      treatMissingData: 'notBreaching',
    });
  }
  return { topicName: `${names.prefix}-alarms`, emails: config.aws.alarms.email, alarms };
}

// ---------------------------------------------------------------------------------------------------------------
// idle cost

/**
 * Warnings about a pausable Aurora that will not pause: any schedule that reaches the database at least once per
 * `pauseAfterMinutes` keeps it awake (and billing at least minimum capacity) around the clock.
 */
export function planIdleWarnings(database: DatabasePlan, schedules: readonly SchedulePlan[]): string[] {
  if (database.kind !== 'aurora' || database.aurora.minAcu > 0) return [];
  const pause = database.aurora.pauseAfterMinutes;
  const awake = schedules.filter((s) => s.rateMinutes <= pause);
  if (awake.length === 0) return [];
  const list = awake.map((s) => `${s.function} every ${s.rateMinutes} min`).join(', ');
  return [
    `Aurora pauses after ${pause} min without connections, but ${list} keep(s) it awake: the database bills its minimum capacity around the clock. Raise aws.functions.<tick>.rateMinutes above ${pause} (wake-ups still start drains when work arrives) or accept the cost; see infra/README.md "Idle cost".`,
  ];
}

// ---------------------------------------------------------------------------------------------------------------
// the configuration shipped to the functions

/**
 * The configuration document each function reads from {@link FUNCTION_CONFIG_PATH}: the user's document (file
 * plus deploy-time overlay, without `admin.token`) with infra's database section and secret references renamed
 * to the secrets infra manages. JSON text, which is YAML too.
 */
export function functionConfigDocument(
  document: Readonly<Record<string, unknown>>,
  database: DatabasePlan,
  secrets: SecretsPlan,
): string {
  const rewrite = (value: unknown): unknown => {
    if (typeof value === 'string') return secrets.rewrites.get(value) ?? value;
    if (Array.isArray(value)) return value.map(rewrite);
    if (typeof value === 'object' && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v)]));
    }
    return value;
  };
  const shipped = rewrite(document) as Record<string, unknown>;
  const written =
    typeof document.database === 'object' && document.database !== null ? document.database : {};
  const { dataDir: _dataDir, ...kept } = written as Record<string, unknown>;
  shipped.database = { ...kept, provider: database.provider, url: database.url };
  return `# Generated by infra/ at deploy time from queuebox.yaml; read by the functions. Do not edit.\n${JSON.stringify(shipped, null, 2)}\n`;
}

// ---------------------------------------------------------------------------------------------------------------
// the whole plan

/** Everything one deployment creates. */
export interface DeployPlan {
  readonly app: string;
  readonly stage: string;
  /** `<app>-<stage>`: resource names and the metrics' service dimension. */
  readonly service: string;
  readonly network: NetworkPlan;
  readonly database: DatabasePlan;
  readonly functions: readonly FunctionPlan[];
  readonly routes: readonly RoutePlan[];
  readonly webhooks: readonly WebhookPlan[];
  readonly schedules: readonly SchedulePlan[];
  readonly brokerTriggers: readonly BrokerTriggerPlan[];
  readonly secrets: SecretsPlan;
  /** Variables every function gets (besides the per-function wake-up variables). */
  readonly environment: Readonly<Record<string, string>>;
  readonly wakeups: readonly WakeupPlan[];
  readonly deferredTicks: readonly FunctionName[];
  readonly alarms: AlarmsPlan;
  readonly warnings: readonly string[];
  /** The text of the configuration file shipped in every function package. */
  readonly functionConfig: string;
}

const POWERTOOLS_LOG_LEVELS = { debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR' } as const;

/**
 * Plans a deployment from the loaded configuration. Throws core's `ConfigError` with every problem the deployment
 * settings (`aws.*`) and the references leave for infra to satisfy, or {@link InfraPlanError} on a broken invariant.
 */
export function planDeployment(
  loaded: DeployConfig,
  options: {
    readonly app: string;
    readonly stage: string;
    readonly env?: Readonly<Record<string, string | undefined>>;
  },
): DeployPlan {
  const { config } = loaded;
  const service = `${options.app}-${options.stage}`;
  const secretPrefix = `${options.app}/${options.stage}`;
  const functions = planFunctions(config);
  const { routes, webhooks } = planRoutes(config);
  const schedules = planSchedules(functions);
  const database = planDatabase(config, loaded.writtenProvider, secretPrefix);
  const network = planNetwork(config, database);
  const brokers = planBrokerTriggers(config);
  const secrets = planSecrets(loaded.references, config, secretPrefix);
  const environment = planEnvironment(loaded.references, options.env ?? process.env);
  const issues = [...network.issues, ...brokers.issues, ...secrets.issues, ...environment.issues];
  if (issues.length > 0) throw new ConfigError(issues);
  return {
    app: options.app,
    stage: options.stage,
    service,
    network: network.network,
    database,
    functions,
    routes,
    webhooks,
    schedules,
    brokerTriggers: brokers.triggers,
    secrets: secrets.secrets,
    environment: {
      ...environment.variables,
      [FUNCTION_ENV.config]: FUNCTION_CONFIG_PATH,
      [FUNCTION_ENV.serviceName]: service,
      [FUNCTION_ENV.metricsNamespace]: METRIC_NAMESPACE,
      [FUNCTION_ENV.logLevel]: POWERTOOLS_LOG_LEVELS[config.logLevel],
    },
    wakeups: planWakeups(functions),
    deferredTicks: planDeferredTicks(functions),
    alarms: planAlarms(config, functions, { prefix: service, service }),
    warnings: planIdleWarnings(database, schedules),
    functionConfig: functionConfigDocument(loaded.document, database, secrets.secrets),
  };
}
