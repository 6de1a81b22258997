import { queueArnOfUrl } from '@queuebox/aws';
import type { AwsSourceConfig, BrokerAuthType, QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import { componentId, sourcesOf } from './functions-plan.ts';
import { isStandIn } from './stand-ins.ts';

// The event source mappings of Kafka, AMQP and SQS sources, with what the configuration leaves for infra to refuse.
// Pure.

interface TriggerCommon {
  /** Pulumi resource name. */
  readonly id: string;
  readonly source: string;
  readonly batchSize: number;
  readonly batchWindowSeconds: number;
  readonly enabled: boolean;
  readonly auth: {
    readonly type: BrokerAuthType;
    readonly secretArn?: string;
    /** Customer-managed key of the secret; the function role gets kms:Decrypt through Secrets Manager. */
    readonly kmsKeyArn?: string;
  };
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

/**
 * An event source mapping on an SQS queue, with `ReportBatchItemFailures`: sqs-source answers which messages of a
 * batch go back to the queue. Lambda polls SQS with the function's role (no network placement, no credentials).
 */
export interface SqsTriggerPlan extends TriggerCommon {
  readonly kind: 'sqs';
  readonly function: 'sqs-source';
  /** Derived from the source's queue URL. */
  readonly queueArn: string;
  readonly fifo: boolean;
  /**
   * Lambda's `ScalingConfig.MaximumConcurrency` for this mapping: the most sqs-source instances it invokes at once
   * (`aws.sources.<name>.maximumConcurrency`, else {@link SQS_DEFAULT_MAXIMUM_CONCURRENCY} fitted to sqs-source's
   * reservation).
   */
  readonly maximumConcurrency: number;
  /** The queue's customer-managed KMS key (SSE-KMS): the function role gets kms:Decrypt on it through SQS. */
  readonly queueKmsKeyArn?: string;
}

/** Any planned event source mapping, discriminated by `kind`. */
export type BrokerTriggerPlan =
  | MskTriggerPlan
  | SelfManagedKafkaTriggerPlan
  | AmazonMqTriggerPlan
  | SqsTriggerPlan;

/** Lambda takes at most 10 SQS messages per batch from a FIFO queue, and from any queue without a batching window. */
const SQS_MAX_BATCH = 10;

/**
 * The most sqs-source instances one SQS mapping invokes at once unless `aws.sources.<name>.maximumConcurrency` says
 * otherwise. Without a cap Lambda scales an SQS mapping up to 1,000 concurrent invocations while a backlog lasts (5
 * at first, then up to 300 more a minute): at 2 connections each (`LAMBDA_POOL_SIZE`, functions-plan.ts), a queue
 * that filled during an outage could ask for up to 2,000 database connections when the database comes back (with
 * the Data API: as many statements at once), and every connection past the database's `max_connections` fails the
 * batch it came for. 10 keeps one queue at 20 connections, the order of what the reserved ticks hold; raise it when
 * the database has room.
 */
export const SQS_DEFAULT_MAXIMUM_CONCURRENCY = 10;

/** The least `ScalingConfig.MaximumConcurrency` Lambda accepts. */
const SQS_MIN_MAXIMUM_CONCURRENCY = 2;

/**
 * Each SQS mapping's maximum concurrency, given the configured ones (`undefined`: not set) and sqs-source's reserved
 * concurrency. AWS: keep a function's reserved concurrency at least the sum of its SQS mappings' maximum
 * concurrency, or Lambda may throttle the mappings' invocations (a throttled batch goes back to its queue, and every
 * receive counts towards the queue's maxReceiveCount). So the default is lowered to an equal share of what the
 * reservation leaves, and a reservation below what the mappings need is a problem. Pure.
 */
export function fitSqsConcurrency(
  configured: readonly (number | undefined)[],
  reserved: number | undefined,
): { values: number[]; problem?: string } {
  if (reserved === undefined) {
    return { values: configured.map((c) => c ?? SQS_DEFAULT_MAXIMUM_CONCURRENCY) };
  }
  const explicit = configured.reduce<number>((sum, c) => sum + (c ?? 0), 0);
  const unset = configured.filter((c) => c === undefined).length;
  const share =
    unset === 0
      ? SQS_DEFAULT_MAXIMUM_CONCURRENCY
      : Math.min(SQS_DEFAULT_MAXIMUM_CONCURRENCY, Math.floor((reserved - explicit) / unset));
  const values = configured.map((c) => c ?? share);
  const total = values.reduce((sum, v) => sum + v, 0);
  if (total <= reserved && share >= SQS_MIN_MAXIMUM_CONCURRENCY) return { values };
  const needed = explicit + unset * SQS_MIN_MAXIMUM_CONCURRENCY;
  return {
    values,
    problem: `is ${reserved}, but sqs-source's ${configured.length} SQS mapping(s) need at least ${needed} (their aws.sources.<name>.maximumConcurrency, ${SQS_MIN_MAXIMUM_CONCURRENCY} at the least each): Lambda would throttle the invocations beyond the reservation, and a throttled batch goes back to its queue as one more receive towards its maxReceiveCount. Raise it, lower the mappings' maximumConcurrency, or set it to false`,
  };
}

const DEFAULT_SOURCE_SETTINGS: AwsSourceConfig = {
  batchSize: 100,
  batchWindowSeconds: 0,
  startingPosition: 'TRIM_HORIZON',
  enabled: true,
  inVpc: true,
};

type AuthKind = Exclude<BrokerTriggerPlan['kind'], 'sqs'>;

const AUTH_ALLOWED: Readonly<Record<AuthKind, readonly BrokerAuthType[]>> = {
  msk: ['iam', 'sasl-scram-512', 'mtls'],
  'self-managed-kafka': ['none', 'sasl-scram-512', 'sasl-scram-256', 'sasl-plain', 'mtls'],
  'amazon-mq': ['basic'],
};

const AUTH_DEFAULT: Readonly<Record<AuthKind, BrokerAuthType>> = {
  msk: 'iam',
  'self-managed-kafka': 'none',
  'amazon-mq': 'basic',
};

/** The name part of a Secrets Manager ARN (`…:secret:AmazonMSK_orders-AbCdEf` → `AmazonMSK_orders-AbCdEf`). */
/** The virtual host of an AMQP url as amqplib reads it: the path without its `/`, decoded; `/` without one. */
export function amqpVirtualHostOf(url: string): string | undefined {
  let pathname: string;
  try {
    pathname = new URL(url).pathname;
  } catch {
    return undefined;
  }
  const vhost = pathname.slice(1);
  if (vhost === '') return '/';
  try {
    return decodeURIComponent(vhost);
  } catch {
    return vhost;
  }
}

function secretNameOf(arn: string): string {
  return arn.slice(arn.indexOf(':secret:') + ':secret:'.length);
}

function authFor(
  kind: AuthKind,
  settings: AwsSourceConfig,
  path: string,
  issues: ConfigIssue[],
): TriggerCommon['auth'] {
  const type = settings.auth?.type ?? AUTH_DEFAULT[kind];
  const secretArn = settings.auth?.secretArn;
  const kmsKeyArn = settings.auth?.kmsKeyArn;
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
  if (!needsSecret && kmsKeyArn !== undefined) {
    issues.push({
      path: `${path}.auth.kmsKeyArn`,
      message: `is for the key of a credentials secret; authentication "${type}" has none`,
    });
  }
  if (kind === 'msk' && type.startsWith('sasl-scram')) {
    // MSK associates only secrets under a customer-managed key whose names start with AmazonMSK_; the event
    // source mapping reads the secret with the function's role, which then needs kms:Decrypt on that key.
    if (kmsKeyArn === undefined) {
      issues.push({
        path: `${path}.auth.kmsKeyArn`,
        message:
          'is required: MSK accepts SASL/SCRAM secrets only under a customer-managed KMS key; give that key so the function role may decrypt the secret',
      });
    }
    if (secretArn !== undefined && !secretNameOf(secretArn).startsWith('AmazonMSK_')) {
      issues.push({
        path: `${path}.auth.secretArn`,
        message: 'names a secret MSK cannot use: MSK SASL/SCRAM secret names start with AmazonMSK_',
      });
    }
  }
  if (!needsSecret || secretArn === undefined) return { type };
  return { type, secretArn, ...(kmsKeyArn !== undefined ? { kmsKeyArn } : {}) };
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
    if (
      source === undefined ||
      (source.type !== 'kafka' && source.type !== 'amqp' && source.type !== 'sqs')
    ) {
      issues.push({
        path,
        message:
          source === undefined
            ? 'names no configured source'
            : `is for a ${source.type} source; only kafka, amqp and sqs sources have event source mappings`,
      });
      continue;
    }
    if (source.type === 'sqs') {
      for (const key of ['mskClusterArn', 'mqBrokerArn', 'auth'] as const) {
        if (own[key] !== undefined)
          issues.push({ path: `${path}.${key}`, message: 'does not apply to an SQS source' });
      }
      continue;
    }
    if (own.maximumConcurrency !== undefined) {
      issues.push({
        path: `${path}.maximumConcurrency`,
        message: `is for SQS sources (Lambda caps only SQS mappings this way); this source is ${source.type}`,
      });
    }
    if (own.queueKmsKeyArn !== undefined) {
      issues.push({
        path: `${path}.queueKmsKeyArn`,
        message: `is for SQS sources; this source is ${source.type} (the key of a credentials secret goes in auth.kmsKeyArn)`,
      });
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
    // The virtual host amqplib reads from the url (its path), unless the url is a secret:// stand-in.
    const urlVhost = isStandIn(source.url) ? undefined : amqpVirtualHostOf(source.url);
    if (own.virtualHost !== undefined && urlVhost !== undefined && own.virtualHost !== urlVhost) {
      issues.push({
        path: `${path}.virtualHost`,
        message: `is "${own.virtualHost}", but sources.${name}.url names the virtual host "${urlVhost}": Lambda would consume queue "${queue}" of another virtual host than QueueBox reads locally; leave virtualHost out or make the two agree`,
      });
      continue;
    }
    triggers.push({
      kind: 'amazon-mq',
      id: `${componentId(name)}Trigger`,
      source: name,
      function: 'amqp-source',
      brokerArn: own.mqBrokerArn,
      queue,
      virtualHost: own.virtualHost ?? urlVhost ?? '/',
      batchSize: own.batchSize,
      batchWindowSeconds: own.batchWindowSeconds,
      enabled: own.enabled,
      auth: authFor('amazon-mq', own, path, issues),
    });
  }
  const sqsQueues = new Map<string, string>();
  const sqsTriggers: (Omit<SqsTriggerPlan, 'maximumConcurrency'> & { configured?: number })[] = [];
  for (const [name, source] of sourcesOf(config, 'sqs')) {
    const own = awsSources[name] ?? DEFAULT_SOURCE_SETTINGS;
    const queueArn = queueArnOfUrl(source.queueUrl);
    if (queueArn === undefined || source.endpoint !== undefined) {
      issues.push({
        path: `sources.${name}.queueUrl`,
        message:
          'is not an AWS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>, no endpoint): Lambda can poll only a real SQS queue',
      });
      continue;
    }
    const other = sqsQueues.get(queueArn);
    if (other !== undefined) {
      issues.push({
        path: `sources.${name}.queueUrl`,
        message: `is the queue of source "${other}" too; sqs-source tells sources apart by queue`,
      });
      continue;
    }
    sqsQueues.set(queueArn, name);
    const fifo = queueArn.endsWith('.fifo');
    if (fifo && own.batchWindowSeconds > 0) {
      // Lambda refuses MaximumBatchingWindowInSeconds on a FIFO queue's mapping ("Batching window is not supported
      // for FIFO queues"): the deploy would fail at the mapping, after the functions and the database were made.
      issues.push({
        path: `aws.sources.${name}.batchWindowSeconds`,
        message: `is ${own.batchWindowSeconds}, but sources.${name} is a FIFO queue and Lambda supports no batching window on FIFO queues; set it to 0 (a FIFO mapping takes at most 10 messages per batch)`,
      });
      continue;
    }
    // aws.sources.<name>.batchSize defaults to 100 for every source type; SQS takes more than 10 only with a
    // batching window, and never from a FIFO queue, so a larger value is lowered to 10 there (documented).
    const batchSize =
      fifo || own.batchWindowSeconds === 0 ? Math.min(own.batchSize, SQS_MAX_BATCH) : own.batchSize;
    sqsTriggers.push({
      kind: 'sqs',
      id: `${componentId(name)}Trigger`,
      source: name,
      function: 'sqs-source',
      queueArn,
      fifo,
      batchSize,
      batchWindowSeconds: own.batchWindowSeconds,
      enabled: own.enabled,
      auth: { type: 'none' },
      ...(own.queueKmsKeyArn !== undefined ? { queueKmsKeyArn: own.queueKmsKeyArn } : {}),
      ...(own.maximumConcurrency !== undefined ? { configured: own.maximumConcurrency } : {}),
    });
  }
  if (sqsTriggers.length > 0) {
    const reserved = config.aws.functions.sqsSource.reservedConcurrency;
    const fitted = fitSqsConcurrency(
      sqsTriggers.map((t) => t.configured),
      typeof reserved === 'number' ? reserved : undefined,
    );
    if (fitted.problem !== undefined) {
      issues.push({ path: 'aws.functions.sqsSource.reservedConcurrency', message: fitted.problem });
    }
    sqsTriggers.forEach(({ configured: _, ...trigger }, i) => {
      triggers.push({ ...trigger, maximumConcurrency: fitted.values[i] ?? SQS_DEFAULT_MAXIMUM_CONCURRENCY });
    });
  }
  return { triggers, issues };
}
