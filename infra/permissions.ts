import * as aws from '@pulumi/aws';
import * as pulumi from '@pulumi/pulumi';
import type { FunctionName } from '@queuebox/deploy-contract';
import type { BrokerTriggerPlan } from './brokers-plan.ts';
import { mskResourceArns } from './destinations-plan.ts';
import type { DeployPlan } from './plan.ts';

// IAM for what the functions do beyond SST's defaults (logs, VPC access): read their secrets, wake each other,
// book one-shot ticks, and let the event source mappings reach MSK / Amazon MQ. Built as plain role policies so
// the statements can be checked under Pulumi mocks.

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

type PlanPart = Pick<DeployPlan, 'wakeups' | 'deferredTicks' | 'brokerTriggers' | 'secrets'> &
  Partial<Pick<DeployPlan, 'publishTargets'>>;

/** `name` or an ARN → the ARN pattern IAM matches (Secrets Manager appends six random characters to names). */
export function secretArnPattern(nameOrArn: string, account: AccountContext): string {
  if (nameOrArn.startsWith('arn:')) return nameOrArn;
  return `arn:${account.partition}:secretsmanager:${account.region}:${account.accountId}:secret:${nameOrArn}-??????`;
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
 * the configuration references (loadConfig resolves them all), plus the database URL.
 */
export function functionPolicyStatements(
  fn: FunctionName,
  plan: PlanPart,
  refs: PolicyRefs,
): PolicyStatement[] {
  const statements: PolicyStatement[] = [];
  const secrets = [
    refs.databaseSecretArn,
    ...refs.managedSecretArns,
    ...plan.secrets.external.map((s) => secretArnPattern(s, refs.account)),
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
 * One inline role policy per function, attached to the role SST created for it. Returns the policies so event
 * source mappings can wait for them (Lambda checks the role when the mapping is created).
 */
export function createFunctionPolicies(
  plan: PlanPart & Pick<DeployPlan, 'functions'>,
  roles: Readonly<Partial<Record<FunctionName, pulumi.Input<string>>>>,
  refs: pulumi.Input<PolicyRefs>,
  opts: pulumi.CustomResourceOptions = {},
): Partial<Record<FunctionName, aws.iam.RolePolicy>> {
  const policies: Partial<Record<FunctionName, aws.iam.RolePolicy>> = {};
  for (const fn of plan.functions) {
    const role = roles[fn.name];
    if (role === undefined) continue;
    policies[fn.name] = new aws.iam.RolePolicy(
      `${fn.id}Policy`,
      {
        role,
        policy: pulumi.output(refs).apply((resolved) =>
          JSON.stringify({
            Version: '2012-10-17',
            Statement: functionPolicyStatements(fn.name, plan, resolved as PolicyRefs),
          }),
        ),
      },
      opts,
    );
  }
  return policies;
}
