import * as aws from '@pulumi/aws';
import * as pulumi from '@pulumi/pulumi';
import type { BrokerAuthType } from '@queuebox/config';
import type { BrokerTriggerPlan } from './brokers-plan.ts';
import { InfraPlanError } from './errors.ts';

// SST has no Kafka or Amazon MQ component: these are plain Lambda event source mappings, one per planned trigger
// (a Kafka mapping carries one topic, so a source with several topics has several mappings). SQS queues get plain
// mappings too, with ReportBatchItemFailures (sqs-source answers per message).

/** A `sourceAccessConfigurations` entry. */
export interface SourceAccess {
  readonly type: string;
  readonly uri: string;
}

const KAFKA_AUTH: Readonly<Partial<Record<BrokerAuthType, string>>> = {
  'sasl-scram-512': 'SASL_SCRAM_512_AUTH',
  'sasl-scram-256': 'SASL_SCRAM_256_AUTH',
  'sasl-plain': 'BASIC_AUTH',
  mtls: 'CLIENT_CERTIFICATE_TLS_AUTH',
};

/** Credentials and virtual host of a trigger (everything but its network placement). Pure. */
export function authAccess(trigger: BrokerTriggerPlan): SourceAccess[] {
  const secret = trigger.auth.secretArn;
  if (trigger.kind === 'sqs') return [];
  if (trigger.kind === 'amazon-mq') {
    return [
      ...(secret ? [{ type: 'BASIC_AUTH', uri: secret }] : []),
      { type: 'VIRTUAL_HOST', uri: trigger.virtualHost },
    ];
  }
  const type = KAFKA_AUTH[trigger.auth.type];
  return type && secret ? [{ type, uri: secret }] : [];
}

/** Where a self-managed Kafka mapping polls from: the install's private subnets and security groups. Pure. */
export function networkAccess(
  subnetIds: readonly string[],
  securityGroupIds: readonly string[],
): SourceAccess[] {
  return [
    ...subnetIds.map((id) => ({ type: 'VPC_SUBNET', uri: `subnet:${id}` })),
    ...securityGroupIds.map((id) => ({ type: 'VPC_SECURITY_GROUP', uri: `security_group:${id}` })),
  ];
}

/** What the mappings attach to. */
export interface BrokerTriggerTargets {
  /** ARNs of kafka-source, amqp-source and sqs-source (only those with triggers are needed). */
  readonly functionArns: Readonly<
    Partial<Record<'kafka-source' | 'amqp-source' | 'sqs-source', pulumi.Input<string>>>
  >;
  readonly privateSubnetIds: pulumi.Input<pulumi.Input<string>[]>;
  readonly securityGroupIds: pulumi.Input<pulumi.Input<string>[]>;
}

/** The mapping's arguments for one trigger. */
export function eventSourceMappingArgs(
  trigger: BrokerTriggerPlan,
  targets: BrokerTriggerTargets,
): aws.lambda.EventSourceMappingArgs {
  const functionName = targets.functionArns[trigger.function];
  if (functionName === undefined) {
    throw new InfraPlanError(`no ${trigger.function} function for the trigger of source ${trigger.source}`);
  }
  const auth = authAccess(trigger);
  const common = {
    functionName,
    batchSize: trigger.batchSize,
    enabled: trigger.enabled,
    ...(trigger.batchWindowSeconds > 0 ? { maximumBatchingWindowInSeconds: trigger.batchWindowSeconds } : {}),
  };
  switch (trigger.kind) {
    case 'msk':
      return {
        ...common,
        eventSourceArn: trigger.clusterArn,
        topics: [trigger.topic],
        startingPosition: trigger.startingPosition,
        amazonManagedKafkaEventSourceConfig: { consumerGroupId: trigger.consumerGroupId },
        ...(auth.length > 0 ? { sourceAccessConfigurations: auth } : {}),
      };
    case 'self-managed-kafka':
      return {
        ...common,
        selfManagedEventSource: {
          endpoints: { KAFKA_BOOTSTRAP_SERVERS: trigger.bootstrapServers.join(',') },
        },
        topics: [trigger.topic],
        startingPosition: trigger.startingPosition,
        selfManagedKafkaEventSourceConfig: { consumerGroupId: trigger.consumerGroupId },
        ...(trigger.inVpc
          ? {
              sourceAccessConfigurations: pulumi
                .all([targets.privateSubnetIds, targets.securityGroupIds])
                .apply(([subnets, groups]) => [...auth, ...networkAccess(subnets, groups)]),
            }
          : auth.length > 0
            ? { sourceAccessConfigurations: auth }
            : {}),
      };
    case 'amazon-mq':
      return {
        ...common,
        eventSourceArn: trigger.brokerArn,
        queues: trigger.queue,
        sourceAccessConfigurations: auth,
      };
    case 'sqs':
      return {
        ...common,
        eventSourceArn: trigger.queueArn,
        functionResponseTypes: ['ReportBatchItemFailures'],
        // Caps the concurrent sqs-source invocations of this queue (and so their database connections).
        scalingConfig: { maximumConcurrency: trigger.maximumConcurrency },
      };
  }
}

/**
 * The resource options of a trigger's mapping. A Kafka mapping names its consumer group, which must be unique among
 * the Kafka event sources and cannot be updated, and a change of its topics or starting position replaces the mapping:
 * made before the old one is deleted (Pulumi's default), the new one would ask for a group id still in use. So a
 * Kafka mapping is deleted first; the new one resumes at the group's committed offsets (Lambda ignores the starting
 * position of a group that exists), and nothing is read twice or skipped, only paused for the replacement.
 */
export function mappingOptions(
  trigger: BrokerTriggerPlan,
  opts: pulumi.CustomResourceOptions,
): pulumi.CustomResourceOptions {
  return trigger.kind === 'msk' || trigger.kind === 'self-managed-kafka'
    ? { ...opts, deleteBeforeReplace: true }
    : opts;
}

/** Creates one event source mapping per planned trigger. */
export function createBrokerTriggers(
  triggers: readonly BrokerTriggerPlan[],
  targets: BrokerTriggerTargets,
  opts: pulumi.CustomResourceOptions = {},
): aws.lambda.EventSourceMapping[] {
  return triggers.map(
    (trigger) =>
      new aws.lambda.EventSourceMapping(
        trigger.id,
        eventSourceMappingArgs(trigger, targets),
        mappingOptions(trigger, opts),
      ),
  );
}
