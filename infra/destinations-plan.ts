import { queueArnOfUrl } from '@queuebox/aws';
import type { QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';

// What outbox-tick may publish to: the ARNs of the SQS, SNS and EventBridge destinations and of the MSK clusters
// that Kafka destinations reach with MSK IAM, for its IAM policy (permissions.ts). Pure.

/** One AWS destination outbox-tick publishes to, and the one action it needs there. */
export type PublishTargetPlan =
  | {
      readonly destination: string;
      readonly service: 'sqs';
      readonly action: 'sqs:SendMessage';
      readonly queueArn: string;
      /** The queue's customer-managed KMS key (`aws.destinations.<name>.kmsKeyArn`). */
      readonly kmsKeyArn?: string;
    }
  | {
      readonly destination: string;
      readonly service: 'sns';
      readonly action: 'sns:Publish';
      readonly topicArn: string;
      /** The topic's customer-managed KMS key (`aws.destinations.<name>.kmsKeyArn`). */
      readonly kmsKeyArn?: string;
    }
  | {
      readonly destination: string;
      readonly service: 'events';
      readonly action: 'events:PutEvents';
      /**
       * The bus's ARN, or its name (the ARN is built in the install's account, in {@link region} when set, else in
       * the install's region).
       */
      readonly eventBus: string;
      /**
       * The destination's `region`, when set: the publisher sends `PutEvents` there (`@queuebox/aws`), so a bus
       * given by name is that region's bus.
       */
      readonly region?: string;
    }
  | {
      readonly destination: string;
      readonly service: 'kafka-cluster';
      readonly action: 'kafka-cluster:WriteData';
      /** The MSK cluster (`aws.destinations.<name>.mskClusterArn`). */
      readonly clusterArn: string;
      /**
       * The topics the destination's `topic` template can render, as one ARN pattern of the cluster's topics: each
       * placeholder (`{{ topic }}`, `{{ key }}`) becomes `*`.
       */
      readonly topicArn: string;
      /** `allowAutoTopicCreation`: the producer may have the broker create a missing topic (kafka-cluster:CreateTopic). */
      readonly createTopics: boolean;
    };

/** Topic and group ARNs of an MSK cluster (`…:cluster/<name>/<uuid>` → `…:topic/<name>/<uuid>/<topic>`). */
export function mskResourceArns(clusterArn: string, topic: string, group: string) {
  return {
    topic: `${clusterArn.replace(':cluster/', ':topic/')}/${topic}`,
    group: `${clusterArn.replace(':cluster/', ':group/')}/${group}`,
  };
}

/**
 * The ARN pattern of the topics a Kafka destination's topic template can render on a cluster: the template's text
 * as it is, each placeholder `*` (IAM's wildcard; Kafka topic names hold neither `*` nor `?`).
 */
export function mskTopicArnPattern(clusterArn: string, topicTemplate: string): string {
  return mskResourceArns(clusterArn, topicTemplate.replace(/\{\{\s*[^{}]*?\s*\}\}/g, '*'), '').topic;
}

/**
 * The publish targets of the configuration's `sqs`, `sns` and `eventbridge` destinations, and of its `kafka`
 * destinations with `sasl: { mechanism: aws }` (MSK IAM): the broker authorizes each request against the producer's
 * IAM role, so without a grant every publish is denied. Such a destination must name its cluster
 * (`aws.destinations.<name>.mskClusterArn`); a cluster on any other destination is refused. A destination with an
 * `endpoint` talks to something else than AWS (a local server): on AWS that is a mistake, so it is refused, as is an
 * SQS queue URL that is not AWS's (its ARN cannot be derived, so no permission could be granted). A queue or topic
 * under a customer-managed KMS key (`aws.destinations.<name>.kmsKeyArn`) carries its key: a producer needs
 * kms:GenerateDataKey and kms:Decrypt on it (SQS and SNS developer guides, key management); settings for a
 * destination that does not exist, or a key on another type, are refused.
 */
export function planPublishTargets(config: QueueBoxConfig): {
  targets: PublishTargetPlan[];
  issues: ConfigIssue[];
} {
  const targets: PublishTargetPlan[] = [];
  const issues: ConfigIssue[] = [];
  for (const [name, own] of Object.entries(config.aws.destinations)) {
    const destination = config.destinations[name];
    if (destination === undefined) {
      issues.push({ path: `aws.destinations.${name}`, message: 'names no configured destination' });
    } else if (own.mskClusterArn !== undefined && !usesMskIam(destination)) {
      issues.push({
        path: `aws.destinations.${name}.mskClusterArn`,
        message: `is for kafka destinations with sasl mechanism aws (MSK IAM: infra grants their publisher on the cluster); this destination is ${destination.type === 'kafka' ? 'kafka without it' : destination.type}`,
      });
    } else if (own.kmsKeyArn !== undefined && destination.type !== 'sqs' && destination.type !== 'sns') {
      issues.push({
        path: `aws.destinations.${name}.kmsKeyArn`,
        message: `is for sqs and sns destinations (infra grants the key to their publisher); this destination is ${destination.type}`,
      });
    }
  }
  for (const [name, destination] of Object.entries(config.destinations)) {
    const kmsKeyArn = config.aws.destinations[name]?.kmsKeyArn;
    const key = kmsKeyArn === undefined ? {} : { kmsKeyArn };
    if (destination.type === 'kafka' && usesMskIam(destination)) {
      const clusterArn = config.aws.destinations[name]?.mskClusterArn;
      if (clusterArn === undefined) {
        issues.push({
          path: `aws.destinations.${name}.mskClusterArn`,
          message: `is required: destinations.${name} signs in to Kafka with MSK IAM (sasl mechanism aws), and infra grants outbox-tick kafka-cluster:Connect, WriteDataIdempotently, DescribeTopic and WriteData on this cluster and its topics; without them the broker denies every publish`,
        });
      } else {
        targets.push({
          destination: name,
          service: 'kafka-cluster',
          action: 'kafka-cluster:WriteData',
          clusterArn,
          topicArn: mskTopicArnPattern(clusterArn, destination.topic),
          createTopics: destination.allowAutoTopicCreation,
        });
      }
      continue;
    }
    if (destination.type !== 'sqs' && destination.type !== 'sns' && destination.type !== 'eventbridge')
      continue;
    if (destination.endpoint !== undefined) {
      issues.push({
        path: `destinations.${name}.endpoint`,
        message: 'points the destination away from AWS; remove it for a deployment (it is for local servers)',
      });
      continue;
    }
    if (destination.type === 'sqs') {
      const queueArn = queueArnOfUrl(destination.queueUrl);
      if (queueArn === undefined) {
        issues.push({
          path: `destinations.${name}.queueUrl`,
          message: 'is not an AWS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)',
        });
      } else targets.push({ destination: name, service: 'sqs', action: 'sqs:SendMessage', queueArn, ...key });
    } else if (destination.type === 'sns') {
      targets.push({
        destination: name,
        service: 'sns',
        action: 'sns:Publish',
        topicArn: destination.topicArn,
        ...key,
      });
    } else {
      targets.push({
        destination: name,
        service: 'events',
        action: 'events:PutEvents',
        eventBus: destination.eventBus,
        ...(destination.region === undefined ? {} : { region: destination.region }),
      });
    }
  }
  return { targets, issues };
}

/** A `kafka` destination that signs in with MSK IAM (`sasl: { mechanism: aws }`). */
function usesMskIam(destination: QueueBoxConfig['destinations'][string]): boolean {
  return destination.type === 'kafka' && destination.sasl?.mechanism === 'aws';
}
