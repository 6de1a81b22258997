// A namespace import: esbuild keeps only the members `import * as z` uses, but all of zod, every locale included,
// behind the re-exported `z` binding of `import { z }` (≈ 360 KiB more in each Lambda bundle). Every file under
// schema/ imports zod the same way.
import * as z from 'zod';
import { adminSchema } from './schema/admin.ts';
import { awsSchema } from './schema/aws.ts';
import { databaseSchema } from './schema/database.ts';
import { destinationSchema } from './schema/destinations.ts';
import { name } from './schema/fields.ts';
import { httpSchema } from './schema/http.ts';
import { inboxSchema } from './schema/inbox.ts';
import { outboxSchema } from './schema/outbox.ts';
import { retentionSchema } from './schema/retention.ts';
import { routeSchema } from './schema/routes.ts';
import { sourcesSchema } from './schema/sources.ts';

// The schema is the single source of truth: every key, default and description lives in it, one file per section
// under schema/ (the defaults other packages apply too come from core's CONFIG_DEFAULTS). Loading (YAML, env,
// references) only fills it; cross-section checks live in validate.ts because zod skips an object's refinements
// as soon as any part of it is invalid, and every problem must be reported at once.

export { ADMIN_TOKEN_MIN_LENGTH, ADMIN_TOKEN_PATTERN } from './schema/admin.ts';
export { BROKER_AUTH_TYPES, type BrokerAuthType } from './schema/aws.ts';
export {
  DATABASE_PROVIDERS,
  type DataApiConfig,
  type DatabaseConfig,
  type DatabaseProvider,
  providerOfUrl,
} from './schema/database.ts';
export { DESTINATION_TYPES, HTTP_TIMEOUT_DEFAULT_MS, HTTP_TIMEOUT_MAX_MS } from './schema/destinations.ts';
export {
  DAY_MS,
  type IdempotencyKeyConfig,
  MAX_ATTEMPTS,
  MAX_RETENTION_HOURS,
  MAX_TIMER_MS,
  NAME_PATTERN,
  SCHEMA_IDENTIFIER,
  type TransformConfig,
  transformSchema,
  WEEK_MS,
} from './schema/fields.ts';
export { RESERVED_HTTP_PATHS } from './schema/inbox.ts';
export {
  OUTBOX_DEFERRED_PAYLOAD_BYTES,
  OUTBOX_LARGE_PAYLOAD_BUDGET_LIMIT,
  OUTBOX_MAX_PAYLOAD_BYTES_LIMIT,
} from './schema/outbox.ts';
export { AUTH_SCHEMES, SCHEMES_WITH_EVENT_TYPE } from './schema/source-auth.ts';
export { DEFAULT_CORRELATION_ID_HEADER, SOURCE_TYPES } from './schema/sources.ts';

/** Log levels, most verbose first. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

// ---------------------------------------------------------------------------------------------------------------
// the whole configuration

/**
 * The configuration schema (zod 4): keys, defaults and descriptions. Every object is strict, so an unknown key
 * anywhere is refused. Cross-section rules (routes name existing destinations, leases outlive function timeouts,
 * HTTP source paths are unique) are checked by `validateConfig`, which also reports every problem at once.
 */
export const configSchema = z.strictObject({
  database: databaseSchema.prefault({}).describe('Where the outbox and inbox tables live.'),
  http: httpSchema.prefault({}).describe('The local HTTP server.'),
  admin: adminSchema.prefault({}).describe('Admin API access.'),
  outbox: outboxSchema.prefault({}).describe('The outbox poller.'),
  inbox: inboxSchema.prefault({}).describe('HTTP ingestion and the relay.'),
  sources: sourcesSchema.prefault({}).describe('Inbox sources by name: http, amqp, kafka, nats or sqs.'),
  destinations: z
    .record(name(), destinationSchema)
    .prefault({})
    .describe('Destinations by name: http, rabbitmq, kafka, nats, sqs, sns or eventbridge.'),
  routes: z.array(routeSchema).default([]).describe('Topic pattern → destination; the first match wins.'),
  aws: awsSchema
    .prefault({})
    .describe('AWS deployment settings, read by infra/ at deploy time; accepted and ignored elsewhere.'),
  retention: retentionSchema.prefault({}).describe('Clean-up of finished rows by the maintenance tick.'),
  logLevel: z.enum(LOG_LEVELS).default('info').describe('debug | info | warn | error. Default info.'),
});

/** The validated configuration, with every default filled in. */
export type QueueBoxConfig = z.output<typeof configSchema>;
/** What a YAML file (plus environment overlay) may contain before defaults are applied. */
export type QueueBoxConfigInput = z.input<typeof configSchema>;

export type HttpConfig = QueueBoxConfig['http'];
export type AdminConfig = QueueBoxConfig['admin'];
export type OutboxConfig = QueueBoxConfig['outbox'];
export type BackoffConfig = OutboxConfig['backoff'];
export type InboxConfig = QueueBoxConfig['inbox'];
export type RelayConfig = InboxConfig['relay'];

/** Any inbox source, discriminated by `type`. */
export type SourceConfig = QueueBoxConfig['sources'][string];
export type HttpSourceConfig = Extract<SourceConfig, { type: 'http' }>;
export type AmqpSourceConfig = Extract<SourceConfig, { type: 'amqp' }>;
export type KafkaSourceConfig = Extract<SourceConfig, { type: 'kafka' }>;
export type NatsSourceConfig = Extract<SourceConfig, { type: 'nats' }>;
export type SqsSourceConfig = Extract<SourceConfig, { type: 'sqs' }>;
export type SourceType = SourceConfig['type'];
export type SourceMode = SourceConfig['mode'];

/** An HTTP source's authentication, discriminated by `scheme`. */
export type SourceAuthConfig = HttpSourceConfig['auth'];
export type AuthScheme = SourceAuthConfig['scheme'];
export type HmacAuthConfig = Extract<SourceAuthConfig, { scheme: 'hmac' }>;

/** Any destination, discriminated by `type`. */
export type DestinationConfig = QueueBoxConfig['destinations'][string];
export type HttpDestinationConfig = Extract<DestinationConfig, { type: 'http' }>;
export type RabbitmqDestinationConfig = Extract<DestinationConfig, { type: 'rabbitmq' }>;
export type KafkaDestinationConfig = Extract<DestinationConfig, { type: 'kafka' }>;
export type NatsDestinationConfig = Extract<DestinationConfig, { type: 'nats' }>;
export type SqsDestinationConfig = Extract<DestinationConfig, { type: 'sqs' }>;
export type SnsDestinationConfig = Extract<DestinationConfig, { type: 'sns' }>;
export type EventBridgeDestinationConfig = Extract<DestinationConfig, { type: 'eventbridge' }>;
export type DestinationType = DestinationConfig['type'];
export type DestinationBackoffConfig = NonNullable<DestinationConfig['backoff']>;

export type RouteConfig = QueueBoxConfig['routes'][number];
export type AwsConfig = QueueBoxConfig['aws'];
export type AwsFunctionsConfig = AwsConfig['functions'];
export type FunctionConfig = AwsFunctionsConfig['inboxHttp'];
export type TickFunctionConfig = AwsFunctionsConfig['outboxTick'];
export type AwsAlarmsConfig = AwsConfig['alarms'];
/** `aws.network` after defaults (a new VPC over 2 AZs with fck-nat EC2 instances). */
export type AwsNetworkConfig = AwsConfig['network'];
/** `aws.database` after defaults (Aurora; `urlKey` url). */
export type AwsDatabaseConfig = AwsConfig['database'];
/** `aws.database.aurora` after defaults (0–4 ACU, pause after 5 min, PostgreSQL 17, idle sessions closed after 60 s). */
export type AuroraConfig = AwsDatabaseConfig['aurora'];
/** `aws.sources.<name>` after defaults (batch 100, window 0 s, TRIM_HORIZON, enabled, in the VPC, vhost `/`). */
export type AwsSourceConfig = AwsConfig['sources'][string];
export type RetentionConfig = QueueBoxConfig['retention'];
export type LogLevel = QueueBoxConfig['logLevel'];

/** The JSON Schema of the configuration file (for editors: yaml-language-server, VS Code). */
export function configJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
