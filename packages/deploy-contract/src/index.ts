// What infra/ and the Lambda handlers in functions/ agree on: the functions, environment variables, the shipped
// configuration file, metric names and the events infra sends. Both sides import this module (and nothing of each
// other); test/infra/contract-parity.test.ts checks that each name here is used on both sides.

/**
 * The eleven Lambda functions, in creation order: a wake-up target is created before the functions waking it, and the
 * broker sources before source-check, which is given their names.
 */
export const FUNCTION_NAMES = [
  'outbox-tick',
  'relay-tick',
  'maintenance-tick',
  'migrate',
  'nats-source-tick',
  'kafka-source',
  'amqp-source',
  'sqs-source',
  'inbox-http',
  'admin-http',
  'source-check',
] as const;

/** A QueueBox Lambda function; its handler is `functions/<name>.handler`. */
export type FunctionName = (typeof FUNCTION_NAMES)[number];

/** The handler path SST bundles for a function: `functions/<name>.ts`, export `handler`. */
export function handlerOf(name: FunctionName): string {
  return `functions/${name}.handler`;
}

/** Where the shipped configuration lands in every function package (the Lambda task root). */
export const FUNCTION_CONFIG_PATH = '/var/task/queuebox.yaml';

/**
 * Environment variables infra sets on the functions. None starts with `QUEUEBOX_` except `QUEUEBOX_CONFIG`: every
 * other `QUEUEBOX_` variable is read as a configuration key (an unknown one is refused), except the reserved names of
 * the repository's own tools (@queuebox/config's `RESERVED_ENV_VARS` / `RESERVED_ENV_PREFIXES`).
 */
export const FUNCTION_ENV = {
  /** Path of the shipped configuration; `loadConfig()` reads it. Every function. */
  config: 'QUEUEBOX_CONFIG',
  /** Name of relay-tick, for the asynchronous wake-up after a push row is stored (inbox-http, broker sources, admin-http). */
  relayTickFunction: 'RELAY_TICK_FUNCTION_NAME',
  /** Name of outbox-tick, for the wake-up after the relay wrote outbox rows (relay-tick, admin-http). */
  outboxTickFunction: 'OUTBOX_TICK_FUNCTION_NAME',
  /** EventBridge Scheduler group for one-shot deferred ticks (outbox-tick, relay-tick, maintenance-tick). */
  wakeScheduleGroup: 'WAKE_SCHEDULE_GROUP',
  /** Role EventBridge Scheduler assumes to invoke the tick (outbox-tick, relay-tick, maintenance-tick). */
  wakeSchedulerRoleArn: 'WAKE_SCHEDULER_ROLE_ARN',
  /** ARN of the Aurora cluster, for `database.dataApi.resourceArn` (Data API access). Every function. */
  databaseClusterArn: 'DATABASE_CLUSTER_ARN',
  /** ARN of the cluster's master secret, for `database.dataApi.secretArn` (Data API access). Every function. */
  databaseSecretArn: 'DATABASE_SECRET_ARN',
  /** Name of kafka-source, whose event source mappings source-check lists (source-check only). */
  kafkaSourceFunction: 'KAFKA_SOURCE_FUNCTION_NAME',
  /** Name of amqp-source, whose event source mappings source-check lists (source-check only). */
  amqpSourceFunction: 'AMQP_SOURCE_FUNCTION_NAME',
  /**
   * JSON `{ "kafka-source": [topic, …], "amqp-source": [queue, …] }`: the mappings infra created disabled
   * (`aws.sources.<name>.enabled: false`), by their topic or queue, which source-check does not report as Disabled
   * (source-check only).
   */
  disabledSourceMappings: 'DISABLED_SOURCE_MAPPINGS',
  /** Powertools service name `<app>-<stage>`; the metrics' `service` dimension. Every function. */
  serviceName: 'POWERTOOLS_SERVICE_NAME',
  /** Powertools metrics namespace, `QueueBox`. Every function. */
  metricsNamespace: 'POWERTOOLS_METRICS_NAMESPACE',
  /** Powertools log level from the configuration's `logLevel`. Every function. */
  logLevel: 'POWERTOOLS_LOG_LEVEL',
  /**
   * Extra CA certificates Node trusts: the Lambda runtime's bundle, which holds the RDS CAs that Node 20+ no
   * longer loads by default. Set when the functions connect to Aurora with certificate verification.
   */
  extraCaCerts: 'NODE_EXTRA_CA_CERTS',
} as const;

/** The CA bundle of the Lambda Node.js runtime, holding the Amazon RDS certificate authorities. */
export const LAMBDA_RUNTIME_CA_BUNDLE = '/var/runtime/ca-cert.pem';

/** CloudWatch namespace of QueueBox's own metrics (EMF). */
export const METRIC_NAMESPACE = 'QueueBox';

/** The dimension Powertools adds from `POWERTOOLS_SERVICE_NAME`; keeps installs in one account apart. */
export const SERVICE_DIMENSION = 'service';

/** The dimension of the per-table gauges. */
export const TABLE_DIMENSION = 'Table';

/**
 * The dimension of outbox-tick's per-destination `Sent` / `Retried` / `Dead` (`{ service, Destination }`: the name of
 * a configured destination), published beside the same counters with `{ service }` alone, whose sums they leave
 * unchanged. Never sent at 0.
 */
export const DESTINATION_DIMENSION = 'Destination';

/** Tables the gauges describe (the values of {@link TABLE_DIMENSION}). */
export const TABLES = ['outbox', 'inbox'] as const;
/** `outbox` or `inbox`. */
export type TableName = (typeof TABLES)[number];

/**
 * Metric names. Gauges carry dimensions `{ service, Table }`: `OldestPendingAgeSeconds` is sampled by outbox-tick
 * (outbox) and relay-tick (inbox) before every drain, both are published by the functions that change the tables
 * (drains, the relay, broker sources storing dead rows, admin requeue / purge) and by maintenance-tick as a daily
 * heartbeat; counters carry `{ service }` and are not sent at 0. The alarms read the gauges and `IngestFailures`,
 * the dashboard reads everything.
 */
export const METRICS = {
  /** Gauge, unit Count: rows in state `dead`. Alarm: > 0. */
  deadRows: 'DeadRows',
  /** Gauge, unit Seconds: age of the oldest `pending` row whose scheduled time has come (0 when none). */
  oldestPendingAge: 'OldestPendingAgeSeconds',
  /** Counter: inbox rows stored (202). */
  accepted: 'Accepted',
  /** Counter: deliveries answered as duplicates (200). */
  duplicate: 'Duplicate',
  /** Counter: inbox requests refused (401, 413, 422, …). */
  rejected: 'Rejected',
  /** Counter: inbox rows the relay forwarded into the outbox. */
  forwarded: 'Forwarded',
  /** Counter: outbox rows delivered. */
  sent: 'Sent',
  /** Counter: deliveries that will be retried. */
  retried: 'Retried',
  /** Counter: rows that went dead. */
  dead: 'Dead',
  /** Counter: settles refused because the claim was lost (lease expired, row reclaimed); no alarm reads it. */
  stale: 'Stale',
  /**
   * Counter: inbound messages handed back unstored for their sender to retry: inbox-http's 5xx answers (500, 503,
   * also when the configuration or the store could not be loaded) and sqs-source's records returned through
   * `batchItemFailures`. These invocations succeed, so Lambda's `Errors` never counts them. Alarm: > 0.
   */
  ingestFailures: 'IngestFailures',
  /**
   * Counter: admin-http's 5xx answers (503: the database unavailable or silent; 500: an unexpected error, a
   * configuration that does not load), which it answers instead of throwing, so Lambda's `Errors` never counts them.
   * Alarm: > 0.
   */
  adminFailures: 'AdminFailures',
  /**
   * Counter: event source mappings of kafka-source / amqp-source that source-check found unable to poll (a
   * `LastProcessingResult` beginning with `PROBLEM`, a mapping Disabled that infra created enabled, a documented
   * Amazon MQ failure code in `StateTransitionReason`). Such a mapping invokes nothing, so no other metric moves.
   * Alarm: > 0.
   */
  sourceProblems: 'SourceProblems',
  /** Milliseconds from a row's creation to its delivery, one value per sent row (outbox-tick). */
  deliveryLatency: 'DeliveryLatency',
} as const;

/** Counters: dimension `{ service }`, emitted where they happen. */
export const COUNTERS = [
  METRICS.accepted,
  METRICS.duplicate,
  METRICS.rejected,
  METRICS.forwarded,
  METRICS.sent,
  METRICS.retried,
  METRICS.dead,
  METRICS.stale,
  METRICS.ingestFailures,
  METRICS.adminFailures,
  METRICS.sourceProblems,
] as const;

/** Gauges: dimensions `{ service, Table }`, published by maintenance-tick on each run (and by the ticks, see METRICS). */
export const GAUGES = [METRICS.deadRows, METRICS.oldestPendingAge] as const;

/** The event infra sends to `migrate` on deploy (the Lambda Invocation's input). */
export interface MigrateEvent {
  readonly trigger: 'deploy';
  /**
   * `migrationsHash` of `@queuebox/store` over the migrations embedded for the provider; a new value re-runs the
   * invocation, and the function refuses a value other than the hash of what it embeds.
   */
  readonly migrationsHash: string;
}

/**
 * The event of a scheduled tick. EventBridge delivers exactly this object (SST's Cron sends its `event` as the
 * rule target's input), not the usual "Scheduled Event" envelope. Wake-ups and deferred ticks are sent by the
 * functions themselves and may use the other triggers.
 */
export interface TickEvent {
  readonly trigger: 'schedule' | 'wakeup' | 'deferred';
}

/** The event infra's schedules send. */
export const SCHEDULED_TICK_EVENT: TickEvent = { trigger: 'schedule' };

/** The payload of a wake-up (an asynchronous invoke from another function). */
export const WAKE_UP_EVENT: TickEvent = { trigger: 'wakeup' };

/** The input of a one-shot deferred tick booked with EventBridge Scheduler. */
export const DEFERRED_TICK_EVENT: TickEvent = { trigger: 'deferred' };
