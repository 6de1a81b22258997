import { queueArnOfUrl } from '@queuebox/aws';
import type { QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';

// What outbox-tick may publish to: the ARNs of the SQS, SNS and EventBridge destinations, for its IAM policy
// (permissions.ts). Pure.

/** One AWS destination outbox-tick publishes to, and the one action it needs there. */
export type PublishTargetPlan =
  | {
      readonly destination: string;
      readonly service: 'sqs';
      readonly action: 'sqs:SendMessage';
      readonly queueArn: string;
    }
  | {
      readonly destination: string;
      readonly service: 'sns';
      readonly action: 'sns:Publish';
      readonly topicArn: string;
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
    };

/**
 * The publish targets of the configuration's `sqs`, `sns` and `eventbridge` destinations. A destination with an
 * `endpoint` talks to something else than AWS (a local server): on AWS that is a mistake, so it is refused, as is an
 * SQS queue URL that is not AWS's (its ARN cannot be derived, so no permission could be granted).
 */
export function planPublishTargets(config: QueueBoxConfig): {
  targets: PublishTargetPlan[];
  issues: ConfigIssue[];
} {
  const targets: PublishTargetPlan[] = [];
  const issues: ConfigIssue[] = [];
  for (const [name, destination] of Object.entries(config.destinations)) {
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
      } else targets.push({ destination: name, service: 'sqs', action: 'sqs:SendMessage', queueArn });
    } else if (destination.type === 'sns') {
      targets.push({
        destination: name,
        service: 'sns',
        action: 'sns:Publish',
        topicArn: destination.topicArn,
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
