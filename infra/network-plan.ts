import type { QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import type { DatabasePlan } from './database-plan.ts';

// Where the functions run: a new VPC or existing subnets. Pure.

/** Where the functions run. */
export type NetworkPlan =
  | { readonly kind: 'create'; readonly nat: 'ec2' | 'managed'; readonly azs: number }
  | {
      readonly kind: 'existing';
      readonly privateSubnetIds: readonly string[];
      readonly securityGroupIds: readonly string[];
    };

/** A new VPC with NAT (default: fck-nat EC2 instances), or existing subnets. */
export function planNetwork(
  config: QueueBoxConfig,
  database: DatabasePlan,
): { network: NetworkPlan; issues: ConfigIssue[] } {
  const net = config.aws.network;
  const issues: ConfigIssue[] = [];
  if (net.existing !== undefined) {
    if (database.kind === 'aurora' && net.existing.privateSubnetIds.length < 2) {
      issues.push({
        path: 'aws.network.existing.privateSubnetIds',
        message: 'lists one subnet; Aurora needs subnets in at least two availability zones',
      });
    }
    return {
      network: {
        kind: 'existing',
        privateSubnetIds: net.existing.privateSubnetIds,
        securityGroupIds: net.existing.securityGroupIds,
      },
      issues,
    };
  }
  if (net.nat === 'none') {
    issues.push({
      path: 'aws.network.nat',
      message:
        'is none, but the functions of a new VPC need NAT to reach Secrets Manager, Lambda and your destinations; use ec2 or managed, or aws.network.existing',
    });
    return { network: { kind: 'create', nat: 'ec2', azs: net.azs }, issues };
  }
  return { network: { kind: 'create', nat: net.nat, azs: net.azs }, issues };
}
