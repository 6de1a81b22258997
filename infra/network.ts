import { createIsolatedDatabaseNetwork } from './database-network.ts';
import type { NetworkPlan } from './network-plan.ts';

// Default (Aurora): the functions run outside any VPC and reach Aurora through the RDS Data API, Secrets Manager,
// Lambda, EventBridge Scheduler and the destinations directly: no NAT, nothing billed by the hour. Aurora itself
// needs subnets: a VPC of private subnets with no route out, which costs nothing.
//
// In a VPC (aws.network.functionsInVpc, SQL Server or another existing database): outbound traffic leaves through
// NAT. The default NAT is "ec2": one t4g.nano fck-nat instance per AZ, about a tenth of the price of managed NAT
// Gateways but with the bandwidth of a nano instance and no automatic fail-over; "managed" buys NAT Gateways.
// `npm run cost` prints what each layout costs idle.

/** Where functions (and Aurora) are placed. */
export interface Network {
  /** The SST VPC when infra created one for the functions. */
  readonly vpc?: sst.aws.Vpc;
  /** What sst.aws.Function accepts as `vpc`; absent: the functions run outside any VPC. */
  readonly functionVpc?:
    | sst.aws.Vpc
    | { privateSubnets: $util.Input<string>[]; securityGroups: $util.Input<string>[] };
  /** Aurora's `vpc` when the functions run outside any VPC: the isolated database subnets. */
  readonly databaseVpc?: { subnets: $util.Input<string>[]; securityGroups: $util.Input<string>[] };
  readonly privateSubnetIds: $util.Output<string[]>;
  readonly securityGroupIds: $util.Output<string[]>;
}

/** Creates the VPC, the isolated database subnets, or describes the existing subnets the configuration names. */
export function createNetwork(plan: NetworkPlan): Network {
  if (plan.kind === 'outside') {
    const isolated = createIsolatedDatabaseNetwork({ azs: plan.azs });
    return {
      databaseVpc: isolated.vpc,
      privateSubnetIds: $util.output([]),
      securityGroupIds: $util.output([]),
    };
  }
  if (plan.kind === 'existing') {
    return {
      functionVpc: { privateSubnets: [...plan.privateSubnetIds], securityGroups: [...plan.securityGroupIds] },
      privateSubnetIds: $util.output([...plan.privateSubnetIds]),
      securityGroupIds: $util.output([...plan.securityGroupIds]),
    };
  }
  const vpc = new sst.aws.Vpc('Network', { az: plan.azs, nat: plan.nat });
  return {
    vpc,
    functionVpc: vpc,
    privateSubnetIds: $util.output(vpc.privateSubnets),
    securityGroupIds: $util.output(vpc.securityGroups),
  };
}
