import * as aws from '@pulumi/aws';
import type * as pulumi from '@pulumi/pulumi';
import { InfraPlanError } from './errors.ts';

// Aurora in subnets the configuration names (aws.network.existing). sst.aws.Aurora takes `vpc` as
// `{ subnets, securityGroups }` (its own source: .sst/platform/src/components/aws/aurora.ts), unlike
// sst.aws.Function's `{ privateSubnets, securityGroups }`: passing the functions' shape left the subnet group
// without subnets. The cluster also needs a security group that admits the functions on the PostgreSQL port: the
// functions' own groups need not admit their own members (only a VPC's default group has such a rule), so infra
// creates one group for the cluster with exactly that ingress rule.

/** PostgreSQL's port, which Aurora PostgreSQL listens on unless told otherwise (infra does not). */
export const POSTGRES_PORT = 5432;

/** The `vpc` argument of sst.aws.Aurora for existing subnets. Pure. */
export function auroraVpc<T>(subnets: T, securityGroups: T): { subnets: T; securityGroups: T } {
  return { subnets, securityGroups };
}

/** The arguments of the cluster's security group: PostgreSQL from the functions' groups, nothing else. Pure. */
export function databaseSecurityGroupArgs(
  vpcId: pulumi.Input<string>,
  functionSecurityGroupIds: pulumi.Input<pulumi.Input<string>[]>,
  description: string,
): aws.ec2.SecurityGroupArgs {
  return {
    vpcId,
    description,
    ingress: [
      {
        description: 'PostgreSQL from the QueueBox functions',
        protocol: 'tcp',
        fromPort: POSTGRES_PORT,
        toPort: POSTGRES_PORT,
        securityGroups: functionSecurityGroupIds,
      },
    ],
    // The cluster opens no connections of its own.
    egress: [],
  };
}

/**
 * Creates the cluster's security group in the VPC of the first private subnet (all subnets of one DB subnet group
 * share a VPC) and answers the `vpc` argument for sst.aws.Aurora.
 */
export function createExistingNetworkDatabaseAccess(args: {
  readonly service: string;
  readonly privateSubnetIds: readonly string[];
  readonly functionSecurityGroupIds: readonly string[];
  readonly opts?: pulumi.CustomResourceOptions;
}): {
  readonly securityGroup: aws.ec2.SecurityGroup;
  readonly vpc: { subnets: pulumi.Input<string>[]; securityGroups: pulumi.Input<string>[] };
} {
  const [first] = args.privateSubnetIds;
  if (first === undefined) throw new InfraPlanError('Aurora needs private subnets');
  const vpcId = aws.ec2.getSubnetOutput({ id: first }, args.opts).vpcId;
  const securityGroup = new aws.ec2.SecurityGroup(
    'DatabaseSecurityGroup',
    databaseSecurityGroupArgs(
      vpcId,
      [...args.functionSecurityGroupIds],
      `QueueBox ${args.service}: Aurora, reachable from the functions' security groups`,
    ),
    args.opts,
  );
  return { securityGroup, vpc: auroraVpc([...args.privateSubnetIds], [securityGroup.id]) };
}
