import { type AwsFunctionsConfig, type QueueBoxConfig, relayRuns } from '@queuebox/config';
import { FUNCTION_NAMES, type FunctionName, handlerOf } from '@queuebox/deploy-contract';
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
  /** Reserved concurrency: the most instances at once; absent: none reserved (the account's pool). */
  readonly reservedConcurrency?: number;
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
  'source-check': 'sourceCheck',
};

const TICKS: readonly FunctionName[] = [
  'outbox-tick',
  'relay-tick',
  'maintenance-tick',
  'nats-source-tick',
  'source-check',
];

/**
 * Reserved concurrency unless `aws.functions.<fn>.reservedConcurrency` says otherwise. A leased drain gains nothing
 * from more than two instances at once (claims skip locked rows, so a third mostly finds nothing), while every
 * instance holds its own database connections: a wake-up storm must not open a pool per burst. Maintenance, NATS
 * pulls and migrations need one. The HTTP and broker functions scale with their traffic (the database connections
 * they can open are bounded by {@link LAMBDA_POOL_SIZE} × their concurrency; see infra/README.md "Quotas").
 */
export const DEFAULT_RESERVED_CONCURRENCY: Readonly<Partial<Record<FunctionName, number>>> = {
  'outbox-tick': 2,
  'relay-tick': 2,
  'maintenance-tick': 1,
  'nats-source-tick': 1,
  migrate: 1,
};

/**
 * Connections per function instance (`database.poolSize` of the shipped configuration): an instance serves one
 * invocation at a time, and a drain settles one batch at a time.
 */
export const LAMBDA_POOL_SIZE = 2;

function reservation(
  name: FunctionName,
  configured: number | false | undefined,
): { reservedConcurrency?: number } {
  if (configured === false) return {};
  const reserved = configured ?? DEFAULT_RESERVED_CONCURRENCY[name];
  return reserved === undefined ? {} : { reservedConcurrency: reserved };
}

/** The arguments of one `sst.aws.Function` besides what only exists at deploy time (network, names). Pure. */
export function functionArgs(
  plan: { readonly service: string },
  fn: FunctionPlan,
  configFile: string,
): {
  handler: string;
  description: string;
  runtime: typeof FUNCTION_BUNDLE.runtime;
  architecture: typeof FUNCTION_BUNDLE.architecture;
  timeout: `${number} seconds`;
  memory: `${number} MB`;
  concurrency?: { reserved: number };
  copyFiles: { from: string; to: string }[];
  retries: number;
  logging: { retention: '1 month' };
  nodejs: ReturnType<typeof functionBundleArgs>;
} {
  return {
    handler: fn.handler,
    description: `QueueBox ${plan.service}: ${fn.reason}`,
    runtime: FUNCTION_BUNDLE.runtime,
    architecture: FUNCTION_BUNDLE.architecture,
    timeout: `${fn.timeoutSeconds} seconds`,
    memory: `${fn.memoryMb} MB`,
    ...(fn.reservedConcurrency !== undefined ? { concurrency: { reserved: fn.reservedConcurrency } } : {}),
    copyFiles: [{ from: configFile, to: 'queuebox.yaml' }],
    // A failed tick or wake-up is not retried: the next tick or wake-up drains the same rows.
    retries: 0,
    // Text format: Powertools writes its own JSON lines and EMF blobs, which Lambda's JSON format would wrap.
    logging: { retention: '1 month' },
    nodejs: functionBundleArgs(),
  };
}

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
      return relayRuns(config) ? 'forwards push-source inbox rows' : undefined;
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
    case 'source-check':
      // Kafka and AMQP sources are event source mappings (brokers-plan.ts): one that cannot poll invokes nothing.
      return sources.some((s) => s.type === 'kafka' || s.type === 'amqp')
        ? 'reports Kafka / Amazon MQ event source mappings that cannot poll'
        : undefined;
  }
}

/**
 * What outbox-tick keeps of its invocation besides its longest request: the shell's safety margin (3 s), the
 * poller's settle reserve twice (2 × 1 s), and 5 s for what runs before the drain (loading, a cold start's first
 * connection), so its drains are long enough for that request (functions/lambda-shell/lambda.ts,
 * packages/outbox's settleReserveMs; both default).
 */
const OUTBOX_TICK_OVERHEAD_MS = 3000 + 2 * 1000 + 5000;

/**
 * Refuses an outbox-tick too short for a destination's longest request (its `timeoutMs`): a drain long enough for
 * it claims and starts only what can run to that timeout; a shorter one starts requests its deadline may cut, each
 * cut an attempt, so a destination that answers within its timeout but not within the drain goes dead.
 */
function refuseUnfittingRequests(config: QueueBoxConfig, timeoutSeconds: number): void {
  const drainMs = timeoutSeconds * 1000 - OUTBOX_TICK_OVERHEAD_MS;
  for (const [name, destination] of Object.entries(config.destinations)) {
    const requestMs =
      'timeoutMs' in destination && typeof destination.timeoutMs === 'number' ? destination.timeoutMs : 0;
    if (requestMs <= drainMs) continue;
    throw new InfraPlanError(
      `outbox-tick would run up to ${timeoutSeconds} s, but destinations.${name}.timeoutMs lets one request take ${requestMs} ms: a tick keeps ${OUTBOX_TICK_OVERHEAD_MS} ms besides it (safety margin, settling, start-up), so raise aws.functions.outboxTick.timeoutSeconds to at least ${Math.ceil((requestMs + OUTBOX_TICK_OVERHEAD_MS) / 1000)} or lower the destination's timeoutMs`,
      { context: { function: 'outbox-tick', timeoutSeconds, destination: name, timeoutMs: requestMs } },
    );
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
    if (name === 'outbox-tick') refuseUnfittingRequests(config, settings.timeoutSeconds);
    plans.push({
      name,
      id: componentId(name),
      handler: handlerOf(name),
      configKey,
      timeoutSeconds: settings.timeoutSeconds,
      memoryMb: settings.memoryMb,
      ...reservation(name, settings.reservedConcurrency),
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
 * small modules of ours (scripts/bundle/aliases.ts; ≈ 1 MB less in every bundle, at the price of Azure AD sign-in
 * to SQL Server and of CHAR/VARCHAR data in CP437, CP850 and CP949, which QueueBox neither uses nor documents),
 * and `import`s of node:http by the module taken with require() (≈ 30 ms less cold start on Node 24).
 * `sourcemap` is off (SST's default): nothing enables source maps at run time (no `NODE_OPTIONS=--enable-source-maps`,
 * which would also slow every cold start), so the stack traces stay minified either way, while each zip carried a
 * 6.8–10.2 MB `.map` (inbox-http's zip 1.99 MB instead of 0.42 MB; an outside audit). SST's Console generates and
 * uploads its own source maps to the bootstrap bucket regardless of this setting.
 */
export const FUNCTION_BUNDLE = {
  runtime: 'nodejs24.x',
  architecture: 'arm64',
  format: 'esm',
  minify: true,
  sourcemap: false,
  keepNames: true,
  external: ['@aws-sdk/*', 'pg-native', 'cpu-features', '@electric-sql/pglite'],
  /** A module whose default export lists esbuild plugins, relative to the repository root (SST's `nodejs.plugins`). */
  plugins: 'scripts/bundle/sst-plugins.ts',
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
