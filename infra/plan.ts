import { configWarnings } from '@queuebox/config';
import { ConfigError } from '@queuebox/core';
import {
  FUNCTION_CONFIG_PATH,
  FUNCTION_ENV,
  type FunctionName,
  LAMBDA_RUNTIME_CA_BUNDLE,
  METRIC_NAMESPACE,
} from '@queuebox/deploy-contract';
import { type AlarmsPlan, planAlarms } from './alarms-plan.ts';
import { planBodyLimit, planRoutes, type RoutePlan, type WebhookPlan } from './api-plan.ts';
import { type BrokerTriggerPlan, planBrokerTriggers } from './brokers-plan.ts';
import type { DeployConfig } from './config.ts';
import { functionConfigDocument } from './config-plan.ts';
import { type IdleCost, planIdleCost } from './cost-plan.ts';
import { auroraVersionIssues, type DatabasePlan, planDatabase } from './database-plan.ts';
import { type PublishTargetPlan, planPublishTargets } from './destinations-plan.ts';
import { InfraPlanError } from './errors.ts';
import { type FunctionPlan, planFunctions } from './functions-plan.ts';
import { functionsInVpc, type NetworkPlan, planNetwork } from './network-plan.ts';
import { planPolicySizes } from './permissions-plan.ts';
import { planIdleWarnings, planSchedules, type SchedulePlan } from './schedules-plan.ts';
import { planEnvironment, planEnvironmentSizes, planSecrets, type SecretsPlan } from './secrets-plan.ts';
import { planSourceCheck, type SourceCheckPlan } from './source-check-plan.ts';
import { planLiteralCredentialWarnings, planStageChecks, planStageWarnings } from './stage-plan.ts';
import { planDeferredTicks, planWakeups, type WakeupPlan } from './wake-ups-plan.ts';

// Everything infra creates is decided by the *-plan.ts files, from the validated configuration, by pure
// functions; this one composes them. The SST and Pulumi code in the other files only applies the plan. Tests
// exercise these functions without SST.

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
  /** The SQS queues, SNS topics and EventBridge buses outbox-tick publishes to (its IAM policy). */
  readonly publishTargets: readonly PublishTargetPlan[];
  readonly secrets: SecretsPlan;
  /** Variables every function gets (besides the per-function wake-up variables). */
  readonly environment: Readonly<Record<string, string>>;
  readonly wakeups: readonly WakeupPlan[];
  readonly deferredTicks: readonly FunctionName[];
  /** What source-check is given (the broker source functions, the mappings created disabled), when it is planned. */
  readonly sourceCheck?: SourceCheckPlan;
  readonly alarms: AlarmsPlan;
  /** Whether a CloudWatch dashboard is created (`aws.dashboard`). */
  readonly dashboard: boolean;
  /** What the install costs a month while idle, item by item (cost-plan.ts). */
  readonly idleCost: IdleCost;
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
  const database = planDatabase(config, loaded.writtenProvider, secretPrefix, functionsInVpc(config));
  const network = planNetwork(config, database);
  const brokers = planBrokerTriggers(config);
  const publish = planPublishTargets(config);
  const secrets = planSecrets(loaded.references, config, secretPrefix);
  const env = options.env ?? process.env;
  const environment = planEnvironment(loaded.references, env);
  const issues = [
    ...planStageChecks(loaded, options.stage, env.USER),
    ...planBodyLimit(config),
    ...auroraVersionIssues(database),
    ...network.issues,
    ...brokers.issues,
    ...publish.issues,
    ...secrets.issues,
    ...environment.issues,
  ];
  if (issues.length > 0) throw new ConfigError(issues);
  const alarms = planAlarms(
    config,
    functions,
    { prefix: service, service },
    // A mapping created disabled is no failure to page about.
    brokers.triggers.flatMap((t) =>
      t.kind === 'sqs' && t.enabled ? [{ source: t.source, queueArn: t.queueArn }] : [],
    ),
  );
  // Outside any VPC there are no install subnets: self-managed Kafka is polled over the internet (the broker must
  // be reachable from there), and the deploy says so.
  const outside = network.network.kind === 'outside';
  const brokerTriggers = brokers.triggers.map((t) =>
    outside && t.kind === 'self-managed-kafka' && t.inVpc ? { ...t, inVpc: false } : t,
  );
  const brokerWarnings = outside
    ? brokers.triggers
        .filter((t) => t.kind === 'self-managed-kafka' && t.inVpc)
        .map(
          (t) =>
            `aws.sources.${t.source}: the functions run outside any VPC, so Lambda polls its Kafka brokers over the internet; set aws.network.functionsInVpc: true to poll from private subnets.`,
        )
    : [];
  // A Kafka destination on MSK IAM: outbox-tick connects to the brokers itself (an event source mapping brings its
  // own network; a producer does not). From outside any VPC, or from a VPC infra creates, it reaches a cluster only
  // through the cluster's public access; inside the cluster's VPC only from subnets the user gives.
  const mskWarnings =
    network.network.kind === 'existing'
      ? []
      : publish.targets.flatMap((t) =>
          t.service === 'kafka-cluster'
            ? [
                `destinations.${t.destination}: outbox-tick runs ${outside ? 'outside any VPC' : 'in a VPC infra creates'}, so it reaches this MSK cluster only if the cluster's public access is turned on (MSK IAM on port 9198); to reach it inside its own VPC, run the functions in its subnets (aws.network.existing) with a security group the cluster's admits.`,
              ]
            : [],
        );
  const wakeups = planWakeups(functions);
  const deferredTicks = planDeferredTicks(functions);
  const sourceCheck = planSourceCheck(functions, brokers.triggers);
  const variables = {
    ...environment.variables,
    [FUNCTION_ENV.config]: FUNCTION_CONFIG_PATH,
    [FUNCTION_ENV.serviceName]: service,
    [FUNCTION_ENV.metricsNamespace]: METRIC_NAMESPACE,
    [FUNCTION_ENV.logLevel]: POWERTOOLS_LOG_LEVELS[config.logLevel],
    // Adds the RDS CAs to what Node trusts, for Aurora's verify-full URL (and an existing RDS database's).
    [FUNCTION_ENV.extraCaCerts]: LAMBDA_RUNTIME_CA_BUNDLE,
  };
  // What AWS refuses only half-way through a deploy: a role's inline policies over 10,240 characters, a function's
  // variables over 4 KB (each measured with the values known only at deploy at their longest).
  const sized = {
    app: options.app,
    stage: options.stage,
    service,
    functions,
    database,
    wakeups,
    deferredTicks,
    ...(sourceCheck === undefined ? {} : { sourceCheck }),
    brokerTriggers,
    publishTargets: publish.targets,
    secrets: secrets.secrets,
    environment: variables,
  };
  const limits = [...planPolicySizes(sized).issues, ...planEnvironmentSizes(sized, environment.paths).issues];
  if (limits.length > 0) throw new ConfigError(limits);
  const idleCost = planIdleCost({
    network: network.network,
    database,
    schedules,
    functions,
    managedSecrets: secrets.secrets.managed.length,
    // What loadConfig() reads with GetSecretValue on every cold start and every 5 minutes of a warm instance: each
    // secret:// name (managed copies, external ones) and the database URL's secret (not the Data API's).
    secretNamesRead: new Set([
      ...secrets.secrets.managed.map((m) => m.secretsManagerName),
      ...secrets.secrets.external,
      ...(database.kind === 'existing'
        ? [database.secretArn]
        : database.access === 'connection'
          ? [database.urlSecretName]
          : []),
    ]).size,
    alarms: alarms.alarms.length,
    dashboard: config.aws.dashboard,
    destinations: Object.keys(config.destinations).length,
  });
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
    brokerTriggers,
    publishTargets: publish.targets,
    secrets: secrets.secrets,
    environment: variables,
    wakeups,
    deferredTicks,
    ...(sourceCheck === undefined ? {} : { sourceCheck }),
    alarms,
    dashboard: config.aws.dashboard,
    idleCost,
    warnings: [
      // What `queuebox config check` and the local runtime warn of, with the inbox public (API Gateway): the deploy
      // showed none of them (an outside audit).
      ...configWarnings(config, { publicInbox: true }).map((w) => `${w.path}: ${w.message}`),
      ...planStageWarnings(config, options.stage, env.USER),
      ...planLiteralCredentialWarnings(loaded, options.stage, env.USER),
      ...planIdleWarnings(database, schedules),
      ...brokerWarnings,
      ...mskWarnings,
    ],
    functionConfig: functionConfigDocument(loaded.document, database, secrets.secrets),
  };
}
