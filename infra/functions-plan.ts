import type { AwsFunctionsConfig, QueueBoxConfig } from '@queuebox/config';
import { FUNCTION_NAMES, type FunctionName, handlerOf } from './contract.ts';
import { InfraPlanError } from './errors.ts';

// The Lambda functions a configuration needs, and how SST bundles them. Pure: tests run it without SST.

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
  'sqs-source': 'sqsSource',
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

export function sourcesOf<T extends QueueBoxConfig['sources'][string]['type']>(
  config: QueueBoxConfig,
  type: T,
) {
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
    case 'sqs-source':
      return sources.some((s) => s.type === 'sqs') ? 'consumes the SQS sources' : undefined;
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
