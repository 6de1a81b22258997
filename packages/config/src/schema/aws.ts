import * as z from 'zod';
import {
  API_GATEWAY_MAX_TIMEOUT_SECONDS,
  int,
  LAMBDA_MAX_TIMEOUT_SECONDS,
  NAME_PATTERN,
  text,
} from './fields.ts';

// `aws`: deployment settings. infra/ reads them when it plans the install; the local runtime and the functions
// accept them (one file serves every runtime) and ignore them.

function functionSchema(timeoutSeconds: number, maxTimeoutSeconds = LAMBDA_MAX_TIMEOUT_SECONDS) {
  return z.strictObject({
    timeoutSeconds: int(1, maxTimeoutSeconds)
      .default(timeoutSeconds)
      .describe(`Function timeout, in seconds. Default ${timeoutSeconds}; at most ${maxTimeoutSeconds}.`),
    memoryMb: int(128, 10_240).default(512).describe('Function memory, in MB. Default 512; at most 10240.'),
    reservedConcurrency: z
      .union([int(1, 1000), z.literal(false)])
      .optional()
      .describe(
        'Reserved concurrency: the most instances at once (each holds up to 2 database connections), at most 1000. Default 2 for outboxTick and relayTick, 1 for maintenanceTick, natsSourceTick and migrate, none otherwise; false reserves none (accounts must keep 100 unreserved).',
      ),
  });
}

/**
 * The longest timeout of a function behind API Gateway: its HTTP API integration gives up after 30 s, a limit that
 * cannot be raised, and inbox-http / admin-http answer 503 one second before their own timeout (`beforeTimeout`,
 * functions/lambda-shell/lambda.ts). At 30 s that answer would come at 29 s of the invocation, after a cold start's
 * init and the invoke itself took their share of API Gateway's 30 s, so the sender would get API Gateway's own error.
 */
const HTTP_FUNCTION_MAX_TIMEOUT_SECONDS = API_GATEWAY_MAX_TIMEOUT_SECONDS - 1;

/**
 * SQS's default visibility timeout. Lambda refuses an SQS event source mapping whose function timeout exceeds the
 * queue's visibility timeout, so sqs-source's default fits a queue made with SQS's defaults.
 */
const SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS = 30;

/**
 * The bounds of an SQS event source mapping's `ScalingConfig.MaximumConcurrency` (Lambda API reference, ScalingConfig:
 * "Minimum value of 2. Maximum value of 1000."). infra/brokers-plan.ts holds the default.
 */
const SQS_MIN_MAXIMUM_CONCURRENCY = 2;
const SQS_MAX_MAXIMUM_CONCURRENCY = 1000;

/** The largest `aws.alarms.oldestPendingAgeSeconds`: 30 days; a row pending longer is long past any alarm. */
const MAX_ALARM_AGE_SECONDS = 2_592_000;

function tickSchema(timeoutSeconds: number, rateMinutes: number) {
  return functionSchema(timeoutSeconds).extend({
    rateMinutes: int(1, 1440)
      .default(rateMinutes)
      .describe(
        `Minutes between scheduled ticks (wake-ups come in between). Default ${rateMinutes}; at most 1440 (24 h).`,
      ),
  });
}

const arnOf = (service: string, what: string) =>
  z
    .string()
    .regex(new RegExp(`^arn:aws[a-z-]*:${service}:[a-z0-9-]+:\\d{12}:.+`), `must be the ARN of ${what}`);

const secretArn = () => arnOf('secretsmanager', 'a Secrets Manager secret');

/** A KMS key ARN: `arn:<partition>:kms:<region>:<account>:key/<key id>` (a UUID, or `mrk-` + 32 hex digits). */
const KMS_KEY_ARN =
  /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/**
 * The ARN of a customer-managed KMS key, as infra grants it. Alias ARNs are refused: IAM identifies a KMS key in a
 * policy's Resource only by its key ARN, so a grant on `…:alias/<name>` would allow no cryptographic operation (AWS
 * KMS Developer Guide, "Specifying KMS keys in IAM policy statements"); the deploy would pass and the function would
 * be denied at run time.
 */
const kmsKeyArn = () =>
  z.string().superRefine((value, ctx) => {
    if (KMS_KEY_ARN.test(value)) return;
    ctx.addIssue({
      code: 'custom',
      message: /^arn:aws[a-z-]*:kms:[^:]*:[^:]*:alias\//.test(value)
        ? 'is an alias ARN: IAM matches KMS keys only by their key ARN, so a grant on an alias allows nothing; give the key ARN (arn:aws:kms:<region>:<account>:key/<key id>, e.g. aws kms describe-key --key-id alias/<name> --query KeyMetadata.Arn)'
        : 'must be the ARN of a KMS key (arn:aws:kms:<region>:<account>:key/<key id>)',
    });
  });

/**
 * The ARN of an MSK cluster, provisioned or serverless: `arn:<partition>:kafka:<region>:<account>:cluster/<name>/<uuid>`
 * (its topics' ARNs are built from it: `…:topic/<name>/<uuid>/<topic>`).
 */
const MSK_CLUSTER_ARN = /^arn:aws[a-z-]*:kafka:[a-z0-9-]+:\d{12}:cluster\/[^/\s]+\/[^/\s]+$/;

/** Where a Kafka or Amazon MQ event source mapping finds its credentials (`aws.sources.<name>.auth.type`). */
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

const awsNetworkSchema = z.strictObject({
  functionsInVpc: z
    .boolean()
    .optional()
    .describe(
      'Run the functions in a VPC (with NAT for their egress). Default: false with Aurora, which the functions reach through the RDS Data API over HTTPS (no NAT, nothing billed by the hour); true with an existing database (aws.database.secretArn), which needs a connection.',
    ),
  nat: z
    .enum(['ec2', 'managed', 'none'])
    .default('ec2')
    .describe(
      'NAT of a created VPC (functions in a VPC only): ec2, one t4g.nano fck-nat instance per AZ (cheap); managed: NAT Gateways; none. Default ec2.',
    ),
  azs: int(2, 6)
    .default(2)
    .describe('Availability zones of the created VPC. Default 2 (Aurora needs 2); at most 6.'),
  existing: z
    .strictObject({
      privateSubnetIds: z.array(z.string().regex(/^subnet-[0-9a-f]+$/, 'must be a subnet id')).min(1),
      securityGroupIds: z.array(z.string().regex(/^sg-[0-9a-f]+$/, 'must be a security group id')).min(1),
    })
    .optional()
    .describe('Run the functions in subnets you already have (with their own egress) instead of a new VPC.'),
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
      .describe(
        'Minutes without connections before a database with minAcu 0 pauses. Default 5; at most 1440 (24 h).',
      ),
    version: z
      .string()
      .regex(/^\d+(\.\d+)?$/, 'must be a version such as 17 or 16.4')
      .refine((version) => Number.parseInt(version, 10) >= 14, {
        message: 'QueueBox needs PostgreSQL 14 or later (its outbox claim reads pg_column_compression)',
      })
      .default('17')
      .describe('Aurora PostgreSQL engine version, 14 or later. Default 17.'),
    idleSessionTimeoutSeconds: int(0, 86_400)
      .default(60)
      .describe(
        'PostgreSQL idle_session_timeout: closes connections that frozen Lambda environments keep open, so the database can pause. 0 turns it off. Default 60; at most 86400 (24 h).',
      ),
  })
  .superRefine((a, ctx) => {
    if (a.maxAcu < a.minAcu)
      ctx.addIssue({ code: 'custom', path: ['maxAcu'], message: 'must be at least minAcu' });
  });

const awsDatabaseSchema = z.strictObject({
  secretArn: secretArn()
    .optional()
    .describe(
      'Existing PostgreSQL or SQL Server: a secret whose JSON holds the connection URL (urlKey), or an RDS database secret (urlKey: false). Default: Aurora.',
    ),
  urlKey: z
    .union([text(), z.literal(false)])
    .default('url')
    .describe(
      'JSON key of the connection URL in secretArn; false: secretArn is an RDS database secret (host, port, username, password, dbname, engine), which RDS managed rotation keeps current. Default url.',
    ),
  provider: z
    .enum(['postgres', 'sqlserver'])
    .optional()
    .describe('Provider of the existing database. Default: database.provider, else postgres.'),
  aurora: auroraSchema
    .prefault({})
    .describe('Aurora Serverless v2 PostgreSQL, created when secretArn is absent.'),
});

const awsSourceSchema = z.strictObject({
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
      kmsKeyArn: kmsKeyArn()
        .optional()
        .describe(
          'Customer-managed KMS key encrypting secretArn: infra grants kms:Decrypt through Secrets Manager. Required for MSK SASL/SCRAM (MSK refuses secrets under the default key).',
        ),
    })
    .optional()
    .describe(
      'Default: iam for MSK, none for self-managed Kafka; Amazon MQ needs { type: basic, secretArn }.',
    ),
  virtualHost: text()
    .optional()
    .describe(
      "Amazon MQ virtual host. Default: the one the source's url names (its path; / without one), or / when the url is a secret:// reference infra cannot read.",
    ),
  batchSize: int(1, 10_000)
    .default(100)
    .describe('Records per invocation. Default 100; at most 10000 (an SQS FIFO queue allows at most 10).'),
  batchWindowSeconds: int(0, 300)
    .default(0)
    .describe(
      'Longest wait to fill a batch, in seconds. Default 0 (Lambda default: 0.5 s for Kafka); at most 300. SQS FIFO queues take none.',
    ),
  startingPosition: z
    .enum(['LATEST', 'TRIM_HORIZON'])
    .default('TRIM_HORIZON')
    .describe(
      "Kafka: where a new consumer group starts (a group that exists resumes at its committed offsets, whatever this says). Default TRIM_HORIZON, the oldest record kept, as the local consumer starts: LATEST skips the topic's records written before the mapping, and a mapping made again for a new group would skip those written in between.",
    ),
  enabled: z.boolean().default(true).describe('Whether the mapping polls. Default true.'),
  inVpc: z
    .boolean()
    .default(true)
    .describe('Self-managed Kafka: poll from the install VPC (private subnets, via NAT). Default true.'),
  maximumConcurrency: int(SQS_MIN_MAXIMUM_CONCURRENCY, SQS_MAX_MAXIMUM_CONCURRENCY)
    .optional()
    .describe(
      `SQS: the most sqs-source instances this queue's mapping invokes at once (Lambda's ScalingConfig.MaximumConcurrency): at least ${SQS_MIN_MAXIMUM_CONCURRENCY}, at most ${SQS_MAX_MAXIMUM_CONCURRENCY}; each instance uses up to 2 database connections. Default 10, lowered to fit aws.functions.sqsSource.reservedConcurrency across the SQS sources when that is set.`,
    ),
  queueKmsKeyArn: kmsKeyArn()
    .optional()
    .describe(
      'SQS: the customer-managed KMS key the queue is encrypted with (SSE-KMS): infra grants sqs-source kms:Decrypt on it, only through SQS. Not needed for SSE-SQS or the AWS managed key alias/aws/sqs.',
    ),
});

/** `aws.destinations.<name>`: what infra needs to know about a destination beyond what its publisher uses. */
const awsDestinationSchema = z.strictObject({
  mskClusterArn: z
    .string()
    .regex(
      MSK_CLUSTER_ARN,
      'must be the ARN of an MSK cluster (arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>)',
    )
    .optional()
    .describe(
      'kafka destination with sasl mechanism aws (MSK IAM): the cluster it publishes to. infra grants outbox-tick kafka-cluster:Connect and WriteDataIdempotently on it, and DescribeTopic and WriteData (CreateTopic too with allowAutoTopicCreation) on the topics its topic template can render. Required for such a destination.',
    ),
  kmsKeyArn: kmsKeyArn()
    .optional()
    .describe(
      'sqs / sns destination: the customer-managed KMS key its queue or topic is encrypted with (SSE-KMS): infra grants outbox-tick kms:GenerateDataKey and kms:Decrypt on it, only through SQS / SNS. Not needed for SSE-SQS or the AWS managed keys.',
    ),
});

export const awsSchema = z.strictObject({
  functions: z
    .strictObject({
      // The safety ticks: wake-ups (inbox → relay → outbox, the client's createOutboxWaker) and deferred ticks start
      // the drains; a periodic tick only catches what no wake-up announced. Each one wakes a paused Aurora.
      outboxTick: tickSchema(60, 360).prefault({}),
      relayTick: tickSchema(60, 360).prefault({}),
      natsSourceTick: tickSchema(60, 1).prefault({}),
      maintenanceTick: tickSchema(300, 1440).prefault({}),
      inboxHttp: functionSchema(29, HTTP_FUNCTION_MAX_TIMEOUT_SECONDS).prefault({}),
      adminHttp: functionSchema(29, HTTP_FUNCTION_MAX_TIMEOUT_SECONDS).prefault({}),
      kafkaSource: functionSchema(60).prefault({}),
      amqpSource: functionSchema(60).prefault({}),
      // A batch of at most 10 messages (no batching window) stores within a few seconds, or within the store's 25 s
      // while a paused Aurora resumes; a timed-out batch comes back whole and is stored again as duplicates.
      sqsSource: functionSchema(SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS).prefault({}),
      migrate: functionSchema(300).prefault({}),
      // Deployed only with Kafka or AMQP sources: lists their event source mappings (never the database), and
      // counts those that cannot poll (infra/README.md "Broker sources that cannot poll").
      sourceCheck: tickSchema(30, 15).prefault({}),
    })
    .prefault({}),
  alarms: z
    .strictObject({
      oldestPendingAgeSeconds: int(1, MAX_ALARM_AGE_SECONDS)
        .default(900)
        .describe(
          `Alarm when the oldest pending row of either table is older than this, in seconds. Default 900; at most ${MAX_ALARM_AGE_SECONDS} (30 days).`,
        ),
      email: z
        .array(z.email('must be an email address'))
        .default([])
        .describe('Addresses subscribed to the alarm topic (each confirms once). Default none.'),
    })
    .prefault({}),
  network: awsNetworkSchema
    .prefault({})
    .describe('Where the functions run: outside any VPC (default with Aurora), a new VPC, or your subnets.'),
  dashboard: z
    .boolean()
    .default(false)
    .describe(
      'Create a CloudWatch dashboard ($3/month beyond the first three of an account). Default false.',
    ),
  database: awsDatabaseSchema
    .prefault({})
    .describe(
      'The database on AWS: Aurora (default) or an existing one; replaces the database section there.',
    ),
  sources: z
    .record(z.string().regex(NAME_PATTERN, 'must be the name of a configured source'), awsSourceSchema)
    .default({})
    .describe('Event source mapping settings per Kafka, AMQP or SQS source.'),
  destinations: z
    .record(
      z.string().regex(NAME_PATTERN, 'must be the name of a configured destination'),
      awsDestinationSchema,
    )
    .default({})
    .describe(
      'Deployment settings per destination (the customer-managed key of an sqs or sns destination, the MSK cluster of a kafka destination with MSK IAM).',
    ),
  secrets: z
    .strictObject({
      external: z
        .array(text())
        .default([])
        .describe('secret:// names that already exist in Secrets Manager: infra grants read access only.'),
      kmsKeyArns: z
        .array(kmsKeyArn())
        .default([])
        .describe(
          'Customer-managed KMS keys of secrets the functions read (the existing database secret, external ones): infra grants kms:Decrypt through Secrets Manager.',
        ),
    })
    .prefault({}),
});
