import type { QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import type { DatabasePlan } from './database-plan.ts';

// Where the functions run: outside any VPC (the default with Aurora), a new VPC with NAT, or existing subnets. Pure.

/** Where the functions run. */
export type NetworkPlan =
  /**
   * The functions run outside any VPC: they reach Aurora through the RDS Data API and everything else (Secrets
   * Manager, Lambda, destinations) directly, so there is no NAT. Aurora itself still lives in subnets: a VPC of
   * `azs` private subnets without any route out (free of charge).
   */
  | { readonly kind: 'outside'; readonly azs: number }
  | { readonly kind: 'create'; readonly nat: 'ec2' | 'managed'; readonly azs: number }
  | {
      readonly kind: 'existing';
      readonly privateSubnetIds: readonly string[];
      readonly securityGroupIds: readonly string[];
    };

/**
 * Whether the functions run in a VPC: `aws.network.functionsInVpc` when written; else false with Aurora (reached
 * through the Data API) and true with an existing database (reached by a connection) or existing subnets.
 */
export function functionsInVpc(config: QueueBoxConfig): boolean {
  const net = config.aws.network;
  if (net.functionsInVpc !== undefined) return net.functionsInVpc;
  return config.aws.database.secretArn !== undefined || net.existing !== undefined;
}

/**
 * Outside any VPC (the default with Aurora), a new VPC with NAT (default: fck-nat EC2 instances), or existing
 * subnets.
 */
export function planNetwork(
  config: QueueBoxConfig,
  database: DatabasePlan,
): { network: NetworkPlan; issues: ConfigIssue[] } {
  const net = config.aws.network;
  const issues: ConfigIssue[] = [];
  if (!functionsInVpc(config)) {
    if (database.kind === 'existing') {
      issues.push({
        path: 'aws.network.functionsInVpc',
        message:
          'is false, but an existing database (aws.database.secretArn) is reached by a connection from inside its VPC; leave functionsInVpc out or set it to true',
      });
    }
    if (net.existing !== undefined) {
      issues.push({
        path: 'aws.network.existing',
        message:
          'names subnets for the functions, but aws.network.functionsInVpc is false; remove one of them',
      });
    }
    return { network: { kind: 'outside', azs: net.azs }, issues };
  }
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
