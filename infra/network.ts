import type { NetworkPlan } from './network-plan.ts';

// Every function runs in the VPC: the database lives there. Outbound traffic (HTTP destinations, brokers,
// Secrets Manager, Lambda wake-ups, EventBridge Scheduler) leaves through NAT. The default NAT is "ec2": one
// t4g.nano fck-nat instance per AZ, about a tenth of the price of managed NAT Gateways but with the bandwidth of
// a nano instance and no automatic fail-over; "managed" buys NAT Gateways. See infra/README.md "Idle cost".

/** Where functions (and Aurora) are placed. */
export interface Network {
  /** The SST VPC when infra created one. */
  readonly vpc?: sst.aws.Vpc;
  /** What sst.aws.Function accepts as `vpc`: `{ privateSubnets, securityGroups }`. */
  readonly functionVpc:
    | sst.aws.Vpc
    | { privateSubnets: $util.Input<string>[]; securityGroups: $util.Input<string>[] };
  readonly privateSubnetIds: $util.Output<string[]>;
  readonly securityGroupIds: $util.Output<string[]>;
}

/** Creates the VPC, or describes the existing subnets the configuration names. */
export function createNetwork(plan: NetworkPlan): Network {
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
