import { type ConfigPath, formatPath, NAME_PATTERN } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import { z } from 'zod';

// Deployment settings that only infra reads. They live in the same queuebox.yaml under `aws.*`, but the
// configuration schema of packages/config does not know them (yet: infra/README.md proposes adding them there),
// so infra takes them out of the document before the document is validated and shipped to the functions.

/** Whether a value is a YAML mapping (not a list, not null). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.number().int().min(min).max(max);

const arnOf = (service: string, what: string) =>
  z
    .string()
    .regex(new RegExp(`^arn:aws[a-z-]*:${service}:[a-z0-9-]+:\\d{12}:.+`), `must be the ARN of ${what}`);

const secretArn = () => arnOf('secretsmanager', 'a Secrets Manager secret');

/** Where a Kafka or Amazon MQ event source mapping finds its credentials. */
export const BROKER_AUTH_TYPES = [
  'none',
  'iam',
  'sasl-scram-512',
  'sasl-scram-256',
  'sasl-plain',
  'basic',
  'mtls',
] as const;
/** One of {@link BROKER_AUTH_TYPES}. */
export type BrokerAuthType = (typeof BROKER_AUTH_TYPES)[number];

const sourceSettingsSchema = z.strictObject({
  mskClusterArn: arnOf('kafka', 'an MSK cluster')
    .optional()
    .describe(
      'Kafka source: consume from this MSK cluster. Default: self-managed Kafka at the source brokers.',
    ),
  mqBrokerArn: arnOf('mq', 'an Amazon MQ broker')
    .optional()
    .describe('AMQP source: the Amazon MQ for RabbitMQ broker holding the queue. Required for AMQP sources.'),
  auth: z
    .strictObject({
      type: z.enum(BROKER_AUTH_TYPES).describe('How the event source mapping authenticates to the broker.'),
      secretArn: secretArn()
        .optional()
        .describe('Secret with the credentials (every type but none and iam).'),
    })
    .optional()
    .describe(
      'Default: iam for MSK, none for self-managed Kafka; Amazon MQ needs { type: basic, secretArn }.',
    ),
  virtualHost: z.string().min(1).default('/').describe('Amazon MQ virtual host. Default /.'),
  batchSize: int(1, 10_000).default(100).describe('Records per invocation. Default 100.'),
  batchWindowSeconds: int(0, 300)
    .default(0)
    .describe('Longest wait to fill a batch, in seconds. Default 0 (Lambda default: 0.5 s for Kafka).'),
  startingPosition: z
    .enum(['LATEST', 'TRIM_HORIZON'])
    .default('LATEST')
    .describe('Kafka: where a new consumer group starts. Default LATEST.'),
  enabled: z.boolean().default(true).describe('Whether the mapping polls. Default true.'),
  inVpc: z
    .boolean()
    .default(true)
    .describe('Self-managed Kafka: poll from the install VPC (private subnets, via NAT). Default true.'),
});

const auroraSchema = z
  .strictObject({
    minAcu: z
      .number()
      .min(0)
      .max(256)
      .multipleOf(0.5)
      .default(0)
      .describe('Smallest capacity; 0 lets the database pause when nothing connects. Default 0.'),
    maxAcu: z.number().min(1).max(256).multipleOf(0.5).default(4).describe('Largest capacity. Default 4.'),
    pauseAfterMinutes: int(5, 1440)
      .default(5)
      .describe('Minutes without connections before a database with minAcu 0 pauses. Default 5.'),
    version: z
      .string()
      .regex(/^\d+(\.\d+)?$/, 'must be a version such as 17 or 16.4')
      .default('17'),
    idleSessionTimeoutSeconds: int(0, 86_400)
      .default(60)
      .describe(
        'PostgreSQL idle_session_timeout: closes connections that frozen Lambda environments keep open, so the database can pause. 0 turns it off. Default 60.',
      ),
  })
  .superRefine((a, ctx) => {
    if (a.maxAcu < a.minAcu)
      ctx.addIssue({ code: 'custom', path: ['maxAcu'], message: 'must be at least minAcu' });
  });

/** The infra-only settings, with defaults; see infra/README.md "Deployment settings". */
export const infraSettingsSchema = z.strictObject({
  network: z
    .strictObject({
      nat: z
        .enum(['ec2', 'managed', 'none'])
        .default('ec2')
        .describe(
          'ec2: one t4g.nano fck-nat instance per AZ (cheap); managed: NAT Gateways; none. Default ec2.',
        ),
      azs: int(2, 6)
        .default(2)
        .describe('Availability zones of the created VPC. Default 2 (Aurora needs 2).'),
      existing: z
        .strictObject({
          privateSubnetIds: z.array(z.string().regex(/^subnet-[0-9a-f]+$/, 'must be a subnet id')).min(1),
          securityGroupIds: z.array(z.string().regex(/^sg-[0-9a-f]+$/, 'must be a security group id')).min(1),
        })
        .optional()
        .describe(
          'Run the functions in subnets you already have (with their own egress) instead of a new VPC.',
        ),
    })
    .prefault({}),
  database: z
    .strictObject({
      secretArn: secretArn()
        .optional()
        .describe(
          'Existing PostgreSQL or SQL Server: a secret whose JSON holds the connection URL. Default: Aurora.',
        ),
      urlKey: z
        .string()
        .min(1)
        .default('url')
        .describe('JSON key of the connection URL in secretArn. Default url.'),
      provider: z
        .enum(['postgres', 'sqlserver'])
        .optional()
        .describe('Provider of the existing database. Default: database.provider, else postgres.'),
      aurora: auroraSchema.prefault({}),
    })
    .prefault({}),
  alarms: z
    .strictObject({
      email: z
        .array(z.email('must be an email address'))
        .default([])
        .describe('Addresses subscribed to the alarm topic (each confirms once). Default none.'),
    })
    .prefault({}),
  sources: z
    .record(z.string().regex(NAME_PATTERN, 'must be the name of a configured source'), sourceSettingsSchema)
    .default({})
    .describe('Event source mapping settings per Kafka or AMQP source.'),
  secrets: z
    .strictObject({
      external: z
        .array(z.string().min(1))
        .default([])
        .describe('secret:// names that already exist in Secrets Manager: infra grants read access only.'),
    })
    .prefault({}),
});

/** Infra-only deployment settings after defaults. */
export type InfraSettings = z.output<typeof infraSettingsSchema>;
/** `aws.sources.<name>` after defaults (batch 100, window 0 s, LATEST, enabled, in the VPC, vhost `/`). */
export type SourceSettings = z.output<typeof sourceSettingsSchema>;
/** `aws.database.aurora` after defaults (0–4 ACU, pause after 5 min, PostgreSQL 17, idle sessions closed after 60 s). */
export type AuroraSettings = InfraSettings['database']['aurora'];

/** Paths of the infra-only keys inside the QueueBox document. */
export const INFRA_ONLY_PATHS: readonly (readonly string[])[] = [
  ['aws', 'network'],
  ['aws', 'database'],
  ['aws', 'sources'],
  ['aws', 'secrets'],
  ['aws', 'alarms', 'email'],
];

/** A document split into what packages/config validates and what only infra reads. */
export interface SplitDocument {
  /** The document without the infra-only keys (a copy; the input is not changed). */
  readonly queuebox: Record<string, unknown>;
  /** The infra-only keys, shaped like {@link infraSettingsSchema} input. */
  readonly infra: Record<string, unknown>;
}

/** Takes the {@link INFRA_ONLY_PATHS} out of a parsed queuebox.yaml document. Pure. */
export function splitDocument(document: unknown): SplitDocument {
  const queuebox: Record<string, unknown> = isPlainObject(document) ? structuredClone(document) : {};
  const infra: Record<string, unknown> = {};
  for (const path of INFRA_ONLY_PATHS) {
    const parentPath = path.slice(0, -1);
    const key = path[path.length - 1] ?? '';
    let parent: unknown = queuebox;
    for (const segment of parentPath) parent = isPlainObject(parent) ? parent[segment] : undefined;
    if (!isPlainObject(parent) || !(key in parent)) continue;
    // The settings schema has no `aws` level: aws.alarms.email becomes alarms.email.
    let target = infra;
    for (const segment of parentPath.slice(1)) {
      const next = isPlainObject(target[segment]) ? (target[segment] as Record<string, unknown>) : {};
      target[segment] = next;
      target = next;
    }
    target[key] = parent[key];
    delete parent[key];
  }
  // An `aws.alarms` left empty by the split stays valid for the config schema; drop empty parents anyway so the
  // document shipped to the functions looks like what the user wrote.
  const aws = queuebox.aws;
  if (isPlainObject(aws)) {
    if (isPlainObject(aws.alarms) && Object.keys(aws.alarms).length === 0) delete aws.alarms;
    if (Object.keys(aws).length === 0) delete queuebox.aws;
  }
  return { queuebox, infra };
}

/** The settings, or every problem with its `aws.*` path and origin. */
export type SettingsResult =
  | { readonly ok: true; readonly settings: InfraSettings }
  | { readonly ok: false; readonly issues: ConfigIssue[] };

/** Validates the infra-only part of a document; issue paths are given as they appear in queuebox.yaml. */
export function parseInfraSettings(
  input: unknown,
  originOfPath: (path: ConfigPath) => string | undefined = () => undefined,
): SettingsResult {
  const result = infraSettingsSchema.safeParse(input ?? {});
  if (result.success) return { ok: true, settings: result.data };
  return {
    ok: false,
    issues: result.error.issues.map((issue) => {
      const path: ConfigPath = ['aws', ...issue.path.map((s) => (typeof s === 'number' ? s : String(s)))];
      const message =
        issue.code === 'unrecognized_keys' ? `unknown key(s): ${issue.keys.join(', ')}` : issue.message;
      const origin = originOfPath(path);
      return origin === undefined
        ? { path: formatPath(path), message }
        : { path: formatPath(path), message, origin };
    }),
  };
}
