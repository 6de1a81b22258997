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

/** CIDR of the isolated database VPC and of its subnets (one /24 per AZ). */
export const ISOLATED_VPC_CIDR = '10.42.0.0/16';

/**
 * The resources of the isolated database network, as arguments. Pure: a VPC with DNS, one private subnet per AZ,
 * no internet gateway, no NAT and no route out, and a security group without ingress (the functions reach Aurora
 * through the Data API, never by a connection). None of them is billed.
 */
export function isolatedDatabaseNetworkArgs(
  service: string,
  azs: number,
): {
  readonly vpc: aws.ec2.VpcArgs;
  readonly subnets: readonly Omit<aws.ec2.SubnetArgs, 'vpcId'>[];
  readonly securityGroup: Omit<aws.ec2.SecurityGroupArgs, 'vpcId'>;
} {
  return {
    vpc: {
      cidrBlock: ISOLATED_VPC_CIDR,
      enableDnsHostnames: true,
      enableDnsSupport: true,
      tags: { Name: `${service}-database` },
    },
    subnets: Array.from({ length: azs }, (_, i) => ({
      cidrBlock: `10.42.${i}.0/24`,
      mapPublicIpOnLaunch: false,
      tags: { Name: `${service}-database-${i + 1}` },
    })),
    securityGroup: {
      description: `QueueBox ${service}: Aurora, reached through the RDS Data API only`,
      ingress: [],
      egress: [],
    },
  };
}

/**
 * Creates the isolated database network for Aurora when the functions run outside any VPC, in the first `azs`
 * availability zones of the region (Aurora needs subnets in two).
 */
export function createIsolatedDatabaseNetwork(args: {
  readonly azs: number;
  readonly service?: string;
  readonly opts?: pulumi.CustomResourceOptions;
}): {
  readonly vpc: { subnets: pulumi.Input<string>[]; securityGroups: pulumi.Input<string>[] };
} {
  const service = args.service ?? 'queuebox';
  const zones = aws.getAvailabilityZonesOutput({ state: 'available' }, args.opts).names;
  const names = Array.from({ length: args.azs }, (_, i) => zones.apply((z) => z[i % z.length] ?? ''));
  const planned = isolatedDatabaseNetworkArgs(service, args.azs);
  const vpc = new aws.ec2.Vpc('DatabaseVpc', planned.vpc, args.opts);
  const subnets = planned.subnets.map(
    (subnet, i) =>
      new aws.ec2.Subnet(
        `DatabaseSubnet${i + 1}`,
        { ...subnet, vpcId: vpc.id, availabilityZone: names[i] },
        args.opts,
      ),
  );
  const securityGroup = new aws.ec2.SecurityGroup(
    'DatabaseSecurityGroup',
    { ...planned.securityGroup, vpcId: vpc.id },
    args.opts,
  );
  return { vpc: { subnets: subnets.map((s) => s.id), securityGroups: [securityGroup.id] } };
}
