import * as aws from '@pulumi/aws';
import type * as pulumi from '@pulumi/pulumi';
import type { FunctionName } from '@queuebox/deploy-contract';
import type { AlarmPlan, AlarmsPlan } from './alarms-plan.ts';
import { InfraPlanError } from './errors.ts';

// Alarms notify one SNS topic; email subscribers from aws.alarms.email confirm once by mail. Anything else that
// should hear about them (chat, paging) subscribes to the topic, whose ARN is a stack output.

/** The alarm topic, its email subscriptions and the alarms. */
export interface Alarms {
  readonly topic: aws.sns.Topic;
  readonly subscriptions: aws.sns.TopicSubscription[];
  readonly alarms: aws.cloudwatch.MetricAlarm[];
}

/** The arguments of one alarm; `functionName` fills the `FunctionName` dimension of function alarms. */
export function metricAlarmArgs(
  alarm: AlarmPlan,
  topicArn: pulumi.Input<string>,
  functionName: pulumi.Input<string> | undefined,
): aws.cloudwatch.MetricAlarmArgs {
  if (alarm.function !== undefined && functionName === undefined) {
    throw new InfraPlanError(`the alarm ${alarm.name} watches ${alarm.function}, which was not created`);
  }
  return {
    name: alarm.name,
    alarmDescription: alarm.description,
    namespace: alarm.namespace,
    metricName: alarm.metricName,
    dimensions:
      functionName === undefined
        ? { ...alarm.dimensions }
        : { ...alarm.dimensions, FunctionName: functionName },
    statistic: alarm.statistic,
    period: alarm.periodSeconds,
    evaluationPeriods: alarm.evaluationPeriods,
    threshold: alarm.threshold,
    comparisonOperator: alarm.comparisonOperator,
    treatMissingData: alarm.treatMissingData,
    alarmActions: [topicArn],
    okActions: [topicArn],
  };
}

/** Creates the topic, the email subscriptions and every planned alarm. */
export function createAlarms(
  plan: AlarmsPlan,
  functionNames: Readonly<Partial<Record<FunctionName, pulumi.Input<string>>>>,
  opts: pulumi.CustomResourceOptions = {},
): Alarms {
  const topic = new aws.sns.Topic('AlarmTopic', { name: plan.topicName }, opts);
  const subscriptions = plan.emails.map(
    (email, i) =>
      new aws.sns.TopicSubscription(
        `AlarmEmail${i + 1}`,
        { topic: topic.arn, protocol: 'email', endpoint: email },
        opts,
      ),
  );
  const alarms = plan.alarms.map(
    (alarm) =>
      new aws.cloudwatch.MetricAlarm(
        alarm.id,
        metricAlarmArgs(
          alarm,
          topic.arn,
          alarm.function === undefined ? undefined : functionNames[alarm.function],
        ),
        opts,
      ),
  );
  return { topic, subscriptions, alarms };
}
