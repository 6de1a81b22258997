import * as aws from '@pulumi/aws';
import * as pulumi from '@pulumi/pulumi';
import type { FunctionName } from '@queuebox/deploy-contract';
import { functionPolicyDocument, type PlanPart, type PolicyRefs } from './permissions-plan.ts';
import type { DeployPlan } from './plan.ts';

// IAM for what the functions do beyond SST's defaults (logs, VPC access): read their secrets, wake each other,
// book one-shot ticks, and let the event source mappings reach MSK / Amazon MQ. Built as plain role policies so
// the statements can be checked under Pulumi mocks; the statements themselves, and the plan's check that each
// role's policy fits IAM's 10,240 characters, are in permissions-plan.ts (pure, no Pulumi).

export {
  type AccountContext,
  eventBusArn,
  functionPolicyStatements,
  managedSecretsPattern,
  type PolicyRefs,
  type PolicyStatement,
  secretArnPattern,
} from './permissions-plan.ts';

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
        policy: pulumi
          .output(refs)
          .apply((resolved) => functionPolicyDocument(fn.name, plan, resolved as PolicyRefs)),
      },
      opts,
    );
  }
  return policies;
}
