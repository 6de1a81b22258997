import type { ConfigIssue } from '@queuebox/core';
import type { FunctionName } from '@queuebox/deploy-contract';
import type { BrokerTriggerPlan } from './brokers-plan.ts';
import type { DatabasePlan } from './database-plan.ts';
import { mskResourceArns } from './destinations-plan.ts';
import type { FunctionPlan } from './functions-plan.ts';
import type { DeployPlan } from './plan.ts';
import type { SecretsPlan } from './secrets-plan.ts';

// The IAM statements of each function (permissions.ts attaches them as one inline role policy per function), and
// the plan check that they fit IAM's size limit. Pure: the plan runs it without Pulumi, tests without mocks.

/** Where the install runs. */
export interface AccountContext {
  readonly partition: string;
  readonly region: string;
  readonly accountId: string;
}

/** Resolved ARNs and names the statements point at. */
export interface PolicyRefs {
  readonly account: AccountContext;
  readonly functionArns: Readonly<Partial<Record<FunctionName, string>>>;
  /** Secrets Manager secrets infra manages (the sst.Secret copies). */
  readonly managedSecretArns: readonly string[];
  /** The secret holding the database URL (infra's for Aurora, the configured one otherwise). */
  readonly databaseSecretArn: string;
  /** The Aurora cluster the functions reach through the RDS Data API, when they do. */
  readonly databaseClusterArn?: string;
  /** EventBridge Scheduler group of the deferred ticks, when there are any. */
  readonly scheduleGroupName?: string;
  readonly schedulerRoleArn?: string;
}

/** One IAM policy statement. */
export interface PolicyStatement {
  readonly Sid: string;
  readonly Effect: 'Allow';
  readonly Action: string[];
  readonly Resource: string[];
  readonly Condition?: Record<string, Record<string, string | string[]>>;
}

/**
 * The `kms:ViaService` value(s) of `service` in the regions of the given ARNs (`arn:<partition>:<service>:<region>:…`):
 * what KMS sees when SQS or SNS uses a key on the caller's behalf. One value, or a list (StringEquals matches any).
 */
function viaService(service: 'sqs' | 'sns', arns: readonly string[]): string | string[] {
  const values = [...new Set(arns.map((arn) => `${service}.${arn.split(':')[3]}.amazonaws.com`))];
  return values.length === 1 && values[0] !== undefined ? values[0] : values;
}

export type PlanPart = Pick<DeployPlan, 'wakeups' | 'deferredTicks' | 'brokerTriggers' | 'secrets'> &
  Partial<Pick<DeployPlan, 'publishTargets'>>;

/** `name` or an ARN → the ARN pattern IAM matches (Secrets Manager appends six random characters to names). */
export function secretArnPattern(nameOrArn: string, account: AccountContext): string {
  if (nameOrArn.startsWith('arn:')) return nameOrArn;
  return `arn:${account.partition}:secretsmanager:${account.region}:${account.accountId}:secret:${nameOrArn}-??????`;
}

/**
 * `<app>/<stage>` holds only Pulumi stack-name characters (letters, digits, `-`, `_`, `.`; never `/`, `*` or `?`):
 * SST deploys each stage as a Pulumi stack, whose names allow nothing else
 * (https://www.pulumi.com/docs/iac/concepts/stacks/, "Stack names may only contain alphanumeric characters,
 * hyphens, underscores, or periods").
 */
const SECRET_PREFIX = /^[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+$/;

/**
 * One ARN pattern for every managed secret copy (`<app>/<stage>/<name>`, secrets-plan.ts): `…:secret:<app>/<stage>/*`,
 * whose `*` also matches the `-XXXXXX` Secrets Manager appends. Only when the prefix is exactly two segments without
 * `/` and every copy is under it: then no other app or stage has a secret under it (`prod/` is not a prefix of
 * `prod-eu/`, and no stage name holds a `/`), so the pattern grants this stage's copies and nothing else, and the
 * policy stays the same size however many `secret://` names the configuration has (each ARN listed cost ~90
 * characters of IAM's 10,240). `undefined` otherwise (no managed secrets, or a prefix that could be shared): the
 * caller lists the copies' ARNs.
 */
export function managedSecretsPattern(
  secrets: Pick<SecretsPlan, 'managed' | 'prefix'>,
  account: AccountContext,
): string | undefined {
  const { prefix, managed } = secrets;
  if (prefix === undefined || managed.length === 0 || !SECRET_PREFIX.test(prefix)) return undefined;
  if (!managed.every((m) => m.secretsManagerName.startsWith(`${prefix}/`))) return undefined;
  return `arn:${account.partition}:secretsmanager:${account.region}:${account.accountId}:secret:${prefix}/*`;
}

const ENI_ACTIONS = [
  'ec2:CreateNetworkInterface',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DeleteNetworkInterface',
  'ec2:DescribeVpcs',
  'ec2:DescribeSubnets',
  'ec2:DescribeSecurityGroups',
];

function triggerStatements(
  triggers: readonly BrokerTriggerPlan[],
  sid: string,
  account: AccountContext,
): PolicyStatement[] {
  if (triggers.length === 0) return [];
  const statements: PolicyStatement[] = [];
  const msk = triggers.filter((t) => t.kind === 'msk');
  const mq = triggers.filter((t) => t.kind === 'amazon-mq');
  const authSecrets = [...new Set(triggers.flatMap((t) => (t.auth.secretArn ? [t.auth.secretArn] : [])))];
  if (msk.length > 0) {
    statements.push({
      Sid: `${sid}Msk`,
      Effect: 'Allow',
      Action: ['kafka:DescribeCluster', 'kafka:DescribeClusterV2', 'kafka:GetBootstrapBrokers'],
      Resource: [...new Set(msk.map((t) => t.clusterArn))],
    });
    const iam = msk.filter((t) => t.auth.type === 'iam');
    if (iam.length > 0) {
      statements.push({
        Sid: `${sid}MskIam`,
        Effect: 'Allow',
        Action: [
          'kafka-cluster:Connect',
          'kafka-cluster:DescribeClusterDynamicConfiguration',
          'kafka-cluster:DescribeTopic',
          'kafka-cluster:ReadData',
          'kafka-cluster:DescribeGroup',
          'kafka-cluster:AlterGroup',
        ],
        Resource: [
          ...new Set(
            iam.flatMap((t) => {
              const arns = mskResourceArns(t.clusterArn, t.topic, t.consumerGroupId);
              return [t.clusterArn, arns.topic, arns.group];
            }),
          ),
        ],
      });
    }
  }
  if (mq.length > 0) {
    statements.push({
      Sid: `${sid}AmazonMq`,
      Effect: 'Allow',
      Action: ['mq:DescribeBroker'],
      Resource: [...new Set(mq.map((t) => t.brokerArn))],
    });
  }
  if (authSecrets.length > 0) {
    statements.push({
      Sid: `${sid}BrokerCredentials`,
      Effect: 'Allow',
      Action: ['secretsmanager:GetSecretValue'],
      Resource: authSecrets,
    });
  }
  const keys = [...new Set(triggers.flatMap((t) => (t.auth.kmsKeyArn ? [t.auth.kmsKeyArn] : [])))];
  if (keys.length > 0) {
    // The mapping reads a secret under a customer-managed key with the function's role: Decrypt, and only when
    // Secrets Manager asks on its behalf.
    statements.push({
      Sid: `${sid}BrokerCredentialsKey`,
      Effect: 'Allow',
      Action: ['kms:Decrypt'],
      Resource: keys,
      Condition: { StringEquals: { 'kms:ViaService': `secretsmanager.${account.region}.amazonaws.com` } },
    });
  }
  const sqs = triggers.filter((t) => t.kind === 'sqs');
  if (sqs.length > 0) {
    // The event source mapping polls with the function's role: receive, delete what the batch handled, make
    // the failures visible again, and read the queue's attributes.
    statements.push({
      Sid: `${sid}Sqs`,
      Effect: 'Allow',
      Action: [
        'sqs:ReceiveMessage',
        'sqs:DeleteMessage',
        'sqs:ChangeMessageVisibility',
        'sqs:GetQueueAttributes',
      ],
      Resource: [...new Set(sqs.map((t) => t.queueArn))],
    });
    const encrypted = sqs.filter((t) => t.queueKmsKeyArn !== undefined);
    if (encrypted.length > 0) {
      // A queue under a customer-managed key (SSE-KMS): SQS decrypts the data key for the mapping's ReceiveMessage
      // with the function's role, which needs kms:Decrypt on that key (SQS developer guide, "Configure KMS
      // permissions for consumers"). Nothing else, and only when SQS asks on the role's behalf.
      statements.push({
        Sid: `${sid}SqsKey`,
        Effect: 'Allow',
        Action: ['kms:Decrypt'],
        Resource: [...new Set(encrypted.flatMap((t) => (t.queueKmsKeyArn ? [t.queueKmsKeyArn] : [])))],
        Condition: {
          StringEquals: {
            'kms:ViaService': viaService(
              'sqs',
              encrypted.map((t) => t.queueArn),
            ),
          },
        },
      });
    }
  }
  if (
    triggers.some(
      (t) => t.kind === 'msk' || t.kind === 'amazon-mq' || (t.kind === 'self-managed-kafka' && t.inVpc),
    )
  ) {
    statements.push({ Sid: `${sid}Network`, Effect: 'Allow', Action: ENI_ACTIONS, Resource: ['*'] });
  }
  return statements;
}

/**
 * The ARN of an EventBridge bus given by name or ARN. A name is a bus of the install's account in `region` (the
 * destination's own `region`, where its publisher sends), else in the install's region.
 */
export function eventBusArn(nameOrArn: string, account: AccountContext, region?: string): string {
  if (nameOrArn.startsWith('arn:')) return nameOrArn;
  return `arn:${account.partition}:events:${region ?? account.region}:${account.accountId}:event-bus/${nameOrArn}`;
}

/**
 * outbox-tick's publish permissions: exactly one action per AWS service it publishes to, on exactly the configured
 * queues, topics and buses (SendMessageBatch needs sqs:SendMessage, PublishBatch sns:Publish), and an idempotent
 * producer's actions on the MSK clusters and topics of Kafka destinations that sign in with MSK IAM.
 */
function publishStatements(plan: PlanPart, account: AccountContext): PolicyStatement[] {
  const targets = plan.publishTargets ?? [];
  const statements: PolicyStatement[] = [];
  const sqs = [...new Set(targets.flatMap((t) => (t.service === 'sqs' ? [t.queueArn] : [])))];
  const sns = [...new Set(targets.flatMap((t) => (t.service === 'sns' ? [t.topicArn] : [])))];
  const buses = [
    ...new Set(
      targets.flatMap((t) => (t.service === 'events' ? [eventBusArn(t.eventBus, account, t.region)] : [])),
    ),
  ];
  if (sqs.length > 0)
    statements.push({ Sid: 'PublishSqs', Effect: 'Allow', Action: ['sqs:SendMessage'], Resource: sqs });
  if (sns.length > 0)
    statements.push({ Sid: 'PublishSns', Effect: 'Allow', Action: ['sns:Publish'], Resource: sns });
  if (buses.length > 0) {
    statements.push({ Sid: 'PutEvents', Effect: 'Allow', Action: ['events:PutEvents'], Resource: buses });
  }
  // Kafka destinations on MSK IAM: what an idempotent producer needs (MSK developer guide, "Common use cases for
  // client authorization policy": Connect and WriteDataIdempotently on the cluster, DescribeTopic and WriteData on
  // the topics), and CreateTopic on the topics of a destination that lets the broker create them.
  const msk = targets.flatMap((t) => (t.service === 'kafka-cluster' ? [t] : []));
  if (msk.length > 0) {
    statements.push(
      {
        Sid: 'PublishMskCluster',
        Effect: 'Allow',
        Action: ['kafka-cluster:Connect', 'kafka-cluster:WriteDataIdempotently'],
        Resource: [...new Set(msk.map((t) => t.clusterArn))],
      },
      {
        Sid: 'PublishMskTopics',
        Effect: 'Allow',
        Action: ['kafka-cluster:DescribeTopic', 'kafka-cluster:WriteData'],
        Resource: [...new Set(msk.map((t) => t.topicArn))],
      },
    );
    const creating = [...new Set(msk.flatMap((t) => (t.createTopics ? [t.topicArn] : [])))];
    if (creating.length > 0) {
      statements.push({
        Sid: 'PublishMskCreateTopics',
        Effect: 'Allow',
        Action: ['kafka-cluster:CreateTopic'],
        Resource: creating,
      });
    }
  }
  // Queues and topics under a customer-managed key (SSE-KMS): the publisher needs kms:GenerateDataKey and kms:Decrypt
  // on it (SQS and SNS developer guides, key management: "the producer must have the kms:GenerateDataKey and
  // kms:Decrypt permissions"), only when SQS / SNS asks on its behalf.
  for (const [service, sid] of [
    ['sqs', 'PublishSqsKey'],
    ['sns', 'PublishSnsKey'],
  ] as const) {
    const encrypted = targets.flatMap((t) =>
      t.service === service && t.kmsKeyArn !== undefined
        ? [{ key: t.kmsKeyArn, arn: t.service === 'sqs' ? t.queueArn : t.topicArn }]
        : [],
    );
    if (encrypted.length === 0) continue;
    statements.push({
      Sid: sid,
      Effect: 'Allow',
      Action: ['kms:GenerateDataKey', 'kms:Decrypt'],
      Resource: [...new Set(encrypted.map((e) => e.key))],
      Condition: {
        StringEquals: {
          'kms:ViaService': viaService(
            service,
            encrypted.map((e) => e.arn),
          ),
        },
      },
    });
  }
  return statements;
}

/**
 * The statements one function needs, from the plan and resolved ARNs. Pure. Every function reads every secret
 * the configuration references (loadConfig resolves them all), plus the database URL: the managed copies through
 * one prefix pattern ({@link managedSecretsPattern}; their ARNs one by one where it does not apply), the database's
 * secret and the external ones by name or ARN.
 */
export function functionPolicyStatements(
  fn: FunctionName,
  plan: PlanPart,
  refs: PolicyRefs,
): PolicyStatement[] {
  if (fn === 'source-check') return sourceCheckStatements();
  const statements: PolicyStatement[] = [];
  const managed = managedSecretsPattern(plan.secrets, refs.account);
  const secrets = [
    refs.databaseSecretArn,
    ...(managed === undefined ? refs.managedSecretArns : [managed]),
    ...plan.secrets.external,
  ].map((s) => secretArnPattern(s, refs.account));
  statements.push({
    Sid: 'ReadConfigurationSecrets',
    Effect: 'Allow',
    Action: ['secretsmanager:GetSecretValue'],
    Resource: [...new Set(secrets)],
  });
  if (plan.secrets.kmsKeyArns && plan.secrets.kmsKeyArns.length > 0) {
    // Secrets under a customer-managed key (an existing database's, external ones): decrypt, only for Secrets Manager.
    statements.push({
      Sid: 'DecryptConfigurationSecrets',
      Effect: 'Allow',
      Action: ['kms:Decrypt'],
      Resource: [...plan.secrets.kmsKeyArns],
      Condition: {
        StringEquals: { 'kms:ViaService': `secretsmanager.${refs.account.region}.amazonaws.com` },
      },
    });
  }
  if (refs.databaseClusterArn !== undefined) {
    statements.push({
      Sid: 'DataApi',
      Effect: 'Allow',
      Action: [
        'rds-data:ExecuteStatement',
        'rds-data:BeginTransaction',
        'rds-data:CommitTransaction',
        'rds-data:RollbackTransaction',
      ],
      Resource: [refs.databaseClusterArn],
    });
  }
  const targets = plan.wakeups
    .filter((w) => w.from === fn)
    .map((w) => refs.functionArns[w.to])
    .filter((arn): arn is string => arn !== undefined);
  if (targets.length > 0) {
    statements.push({ Sid: 'WakeUp', Effect: 'Allow', Action: ['lambda:InvokeFunction'], Resource: targets });
  }
  if (plan.deferredTicks.includes(fn) && refs.scheduleGroupName && refs.schedulerRoleArn) {
    const { partition, region, accountId } = refs.account;
    statements.push({
      Sid: 'BookDeferredTick',
      Effect: 'Allow',
      Action: [
        'scheduler:CreateSchedule',
        'scheduler:UpdateSchedule',
        'scheduler:DeleteSchedule',
        'scheduler:GetSchedule',
      ],
      Resource: [`arn:${partition}:scheduler:${region}:${accountId}:schedule/${refs.scheduleGroupName}/*`],
    });
    statements.push({
      Sid: 'PassSchedulerRole',
      Effect: 'Allow',
      Action: ['iam:PassRole'],
      Resource: [refs.schedulerRoleArn],
      Condition: { StringEquals: { 'iam:PassedToService': 'scheduler.amazonaws.com' } },
    });
  }
  if (fn === 'outbox-tick') statements.push(...publishStatements(plan, refs.account));
  statements.push(
    ...triggerStatements(
      plan.brokerTriggers.filter((t) => t.function === fn),
      'Trigger',
      refs.account,
    ),
  );
  return statements;
}

/**
 * source-check's only permission: listing the event source mappings of kafka-source and amqp-source. It reads no
 * secret (it never loads the configuration) and never reaches the database. `Resource: "*"`: the Service
 * Authorization Reference ("Actions, resources, and condition keys for AWS Lambda",
 * https://docs.aws.amazon.com/service-authorization/latest/reference/list_awslambda.html) says an action with no
 * resource type must be granted on all resources; ListEventSourceMappings is a List action taken as having none
 * (its row was not read, only the page's rule: unverified). The mappings are chosen by the request's
 * `FunctionName`, not by the policy, and listing grants no change.
 */
function sourceCheckStatements(): PolicyStatement[] {
  return [
    {
      Sid: 'ListSourceMappings',
      Effect: 'Allow',
      Action: ['lambda:ListEventSourceMappings'],
      Resource: ['*'],
    },
  ];
}

/** The policy document of one function, as its inline role policy holds it (no whitespace). */
export function functionPolicyDocument(fn: FunctionName, plan: PlanPart, refs: PolicyRefs): string {
  return JSON.stringify({ Version: '2012-10-17', Statement: functionPolicyStatements(fn, plan, refs) });
}

/**
 * What IAM allows all the inline policies of one role together, in characters, white space not counted
 * (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html: "You can add as many inline policies
 * as you want to an IAM user, role, or group. But the total aggregate policy size (the sum size of all inline
 * policies) per entity cannot exceed the following quotas: … Role policy size cannot exceed 10,240 characters."; "IAM
 * doesn't count white space when calculating the size of a policy against these quotas"). Not adjustable.
 */
export const ROLE_INLINE_POLICIES_MAX_CHARS = 10_240;

/**
 * The inline policy `sst dev` adds to each function's role (SST 4.17 function.ts: `appsync:*` on `*`, `s3:*` on its
 * asset bucket and the bucket's objects), at its longest (a 63-character bucket name): counted in the aggregate.
 * A deploy adds none (the functions have no `permissions` or `link`).
 */
export const SST_DEV_INLINE_POLICY_CHARS = JSON.stringify({
  Version: '2012-10-17',
  Statement: [
    { Effect: 'Allow', Action: 'appsync:*', Resource: '*' },
    {
      Effect: 'Allow',
      Action: 's3:*',
      Resource: [`arn:aws-us-gov:s3:::${'b'.repeat(63)}`, `arn:aws-us-gov:s3:::${'b'.repeat(63)}/*`],
    },
  ],
}).length;

/**
 * The account and ARNs known only at deploy, at their longest plausible, for {@link planPolicySizes}:
 *
 * - partition `aws-us-gov` and region `us-isof-south-1`, the longest AWS has (the partitions table of @aws-sdk/core);
 * - function names of 64 characters and the scheduler role's name of 64 (SST names them with `physicalName(64, …)`,
 *   IAM's and Lambda's maximum), an Aurora cluster identifier of 63 (RDS's maximum);
 * - Aurora's master secret as SST names it, `<app>-<stage>-DatabaseProxySecret-<8 chars>` (`physicalName(512, …)`),
 *   the URL secret `<app>/<stage>/database`, an existing database's configured ARN; managed copies by their names;
 *   every secret with Secrets Manager's `-XXXXXX`.
 */
export function longestPolicyRefs(
  plan: Pick<DeployPlan, 'service' | 'functions' | 'deferredTicks'> & {
    readonly database: DatabasePlan;
    readonly secrets: Pick<SecretsPlan, 'managed'>;
  },
): PolicyRefs {
  const account: AccountContext = {
    partition: 'aws-us-gov',
    region: 'us-isof-south-1',
    accountId: '123456789012',
  };
  const arn = (service: string, resource: string, region = account.region) =>
    `arn:${account.partition}:${service}:${region}:${account.accountId}:${resource}`;
  const secret = (name: string) => arn('secretsmanager', `secret:${name}-XXXXXX`);
  const { database } = plan;
  const databaseSecretArn =
    database.kind === 'existing'
      ? database.secretArn
      : secret(
          database.access === 'data-api'
            ? `${plan.service}-DatabaseProxySecret-xxxxxxxx`
            : database.urlSecretName,
        );
  return {
    account,
    functionArns: Object.fromEntries(
      plan.functions.map((f) => [f.name, arn('lambda', `function:${'f'.repeat(64)}`)]),
    ),
    managedSecretArns: plan.secrets.managed.map((m) => secret(m.secretsManagerName)),
    databaseSecretArn,
    ...(database.kind === 'aurora' && database.access === 'data-api'
      ? { databaseClusterArn: arn('rds', `cluster:${'c'.repeat(63)}`) }
      : {}),
    ...(plan.deferredTicks.length > 0
      ? {
          scheduleGroupName: `${plan.service}-ticks`,
          schedulerRoleArn: arn('iam', `role/${'r'.repeat(64)}`, ''),
        }
      : {}),
  };
}

/** Characters IAM counts in a policy document: all but white space. */
export function policyChars(document: string): number {
  return document.replace(/\s/g, '').length;
}

/**
 * Each function's inline role policy, serialized as {@link functionPolicyDocument} (what permissions.ts attaches)
 * with {@link longestPolicyRefs}, plus {@link SST_DEV_INLINE_POLICY_CHARS}: an issue for every function whose role
 * would hold more than {@link ROLE_INLINE_POLICIES_MAX_CHARS}, where PutRolePolicy would fail the deploy half-way.
 */
export function planPolicySizes(
  plan: PlanPart &
    Pick<DeployPlan, 'service' | 'functions' | 'deferredTicks'> & {
      readonly database: DatabasePlan;
    },
): { sizes: Partial<Record<FunctionName, number>>; issues: ConfigIssue[] } {
  const refs = longestPolicyRefs(plan);
  const sizes: Partial<Record<FunctionName, number>> = {};
  const issues: ConfigIssue[] = [];
  for (const fn of plan.functions) {
    const size = policyChars(functionPolicyDocument(fn.name, plan, refs)) + SST_DEV_INLINE_POLICY_CHARS;
    sizes[fn.name] = size;
    if (size > ROLE_INLINE_POLICIES_MAX_CHARS) issues.push(policySizeIssue(fn, size, plan, refs));
  }
  return { sizes, issues };
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function policySizeIssue(fn: FunctionPlan, size: number, plan: PlanPart, refs: PolicyRefs): ConfigIssue {
  const pattern = managedSecretsPattern(plan.secrets, refs.account) !== undefined;
  const secrets = plan.secrets.external.length + (pattern ? 0 : plan.secrets.managed.length);
  const targets = fn.name === 'outbox-tick' ? (plan.publishTargets ?? []).length : 0;
  const triggers = plan.brokerTriggers.filter((t) => t.function === fn.name).length;
  const grown = [
    ...(secrets > 0
      ? [
          `it reads ${secrets} secret(s) each granted by ARN (aws.secrets.external, secret://arn:…${pattern ? '' : ', secret:// names'}): keep several values in one secret and read each with secret://name#key`,
        ]
      : []),
    ...(targets > 0
      ? [
          `it publishes to ${targets} SQS queue(s), SNS topic(s), EventBridge bus(es) or MSK topic(s), each granted by ARN: send to fewer (one SNS topic or EventBridge bus fans out to many subscribers)`,
        ]
      : []),
    ...(triggers > 0
      ? [`${triggers} broker source(s) trigger it, each granted its resources: use fewer`]
      : []),
  ];
  return {
    path: `aws.functions.${fn.configKey}`,
    message: `the IAM role policy of ${fn.name} would be ${size.toLocaleString('en-US')} characters (white space not counted, ARNs known only at deploy at their longest, with the policy sst dev adds), over the ${ROLE_INLINE_POLICIES_MAX_CHARS.toLocaleString('en-US')} IAM allows all inline policies of a role: the deploy would fail at PutRolePolicy. ${grown.length > 0 ? capitalized(grown.join('; ')) : 'Reference fewer secrets and AWS resources'}.`,
  };
}
