import * as aws from '@pulumi/aws';
import * as pulumi from '@pulumi/pulumi';

// A drain that stops with rows scheduled for later books one one-shot EventBridge Scheduler call of its own
// function at the earliest due time (docs/design.md §3), so a pausable database is not kept awake by minute ticks.
// Infra provides the schedule group, and the role the scheduler assumes to invoke the ticks.

/** The schedule group and the role EventBridge Scheduler uses for deferred ticks. */
export interface DeferredTickScheduling {
  readonly group: aws.scheduler.ScheduleGroup;
  readonly role: aws.iam.Role;
}

/** The scheduler role's trust policy: only EventBridge Scheduler, only on behalf of this account. Pure. */
export function schedulerTrustPolicy(accountId: string): string {
  return JSON.stringify({
    Version: '2012-10-17',
    Statement: [
      {
        Effect: 'Allow',
        Principal: { Service: 'scheduler.amazonaws.com' },
        Action: 'sts:AssumeRole',
        Condition: { StringEquals: { 'aws:SourceAccount': accountId } },
      },
    ],
  });
}

/**
 * Creates the schedule group `groupName` (the ticks create one-shot schedules in it, which delete themselves
 * after running) and the role the scheduler assumes. The functions get both names, so this comes first;
 * {@link allowSchedulerToInvoke} adds the role's permission once the functions exist.
 */
export function createDeferredTickScheduling(args: {
  readonly groupName: string;
  readonly accountId: pulumi.Input<string>;
  readonly opts?: pulumi.CustomResourceOptions;
}): DeferredTickScheduling {
  const group = new aws.scheduler.ScheduleGroup('DeferredTickGroup', { name: args.groupName }, args.opts);
  const role = new aws.iam.Role(
    'DeferredTickSchedulerRole',
    { assumeRolePolicy: pulumi.output(args.accountId).apply(schedulerTrustPolicy) },
    args.opts,
  );
  return { group, role };
}

/** Lets the scheduler role invoke exactly `targetArns` (the tick functions). */
export function allowSchedulerToInvoke(
  role: aws.iam.Role,
  targetArns: pulumi.Input<pulumi.Input<string>[]>,
  opts: pulumi.CustomResourceOptions = {},
): aws.iam.RolePolicy {
  return new aws.iam.RolePolicy(
    'DeferredTickSchedulerPolicy',
    {
      role: role.name,
      policy: pulumi.output(targetArns).apply((arns) =>
        JSON.stringify({
          Version: '2012-10-17',
          Statement: [{ Effect: 'Allow', Action: ['lambda:InvokeFunction'], Resource: arns }],
        }),
      ),
    },
    opts,
  );
}

/** The policy document that allows exactly an invoke of outbox-tick (for applications that wake it). Pure. */
export function wakeOutboxPolicyDocument(outboxTickArn: string): string {
  return JSON.stringify({
    Version: '2012-10-17',
    Statement: [
      { Sid: 'WakeOutboxTick', Effect: 'Allow', Action: 'lambda:InvokeFunction', Resource: outboxTickArn },
    ],
  });
}

/**
 * The managed policy `<service>-wake-outbox` that an application's role attaches to call
 * `@queuebox/client`'s `createOutboxWaker` (stack output `wakeOutboxPolicyArn`, with `outboxTickFunction`).
 */
export function createWakeOutboxPolicy(
  service: string,
  outboxTickArn: pulumi.Input<string> | undefined,
  opts: pulumi.CustomResourceOptions = {},
): aws.iam.Policy | undefined {
  if (outboxTickArn === undefined) return undefined;
  return new aws.iam.Policy(
    'WakeOutboxPolicy',
    {
      name: `${service}-wake-outbox`,
      description: `QueueBox ${service}: lets an application wake outbox-tick after its commit`,
      policy: pulumi.output(outboxTickArn).apply(wakeOutboxPolicyDocument),
    },
    opts,
  );
}
