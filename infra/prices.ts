// The list prices infra's idle-cost estimate uses (infra/cost-plan.ts), kept as data with where each came from
// and when it was read. us-east-1, on-demand, USD, without free tiers (an account's free tier makes the real bill
// lower, never higher). Update the table, its date and its sources together; `npm run cost` prints the date.

/** One price: the amount, the unit, and where it was read. */
export interface Price {
  readonly usd: number;
  readonly unit: string;
  readonly source: string;
}

/** When the table was last checked against its sources. */
export const PRICES_CHECKED = '2026-12-01';

/** The region the table holds. */
export const PRICES_REGION = 'us-east-1';

/** Hours in the month the estimate bills (AWS pricing pages use 730). */
export const HOURS_PER_MONTH = 730;

export const PRICES = {
  auroraServerlessV2AcuHour: {
    usd: 0.12,
    unit: 'ACU-hour (Aurora Standard, PostgreSQL)',
    source:
      'https://aws.amazon.com/rds/aurora/pricing/ — also SST 4.17 sst.aws.Aurora docs ("Each ACU costs $0.12 per hour")',
  },
  auroraStorageGbMonth: {
    usd: 0.1,
    unit: 'GB-month (Aurora Standard storage)',
    source: 'https://aws.amazon.com/rds/aurora/pricing/ (Aurora Standard: $0.10 per GB-month)',
  },
  dataApiMillionRequests: {
    usd: 0.35,
    unit: 'million Data API requests (first billion)',
    source:
      'https://aws.amazon.com/rds/aurora/pricing/#Data_API_costs — also SST 4.17 sst.aws.Aurora docs ("$0.35 per million requests")',
  },
  secretMonth: {
    usd: 0.4,
    unit: 'secret-month',
    source: 'https://aws.amazon.com/secrets-manager/pricing/ ($0.40 per secret per month)',
  },
  secretsManagerTenThousandCalls: {
    usd: 0.05,
    unit: '10,000 Secrets Manager API calls (GetSecretValue)',
    source:
      'https://aws.amazon.com/secrets-manager/pricing/ ($0.05 per 10,000 API calls); checked 2026-12-07, after the rest of the table',
  },
  alarmMonth: {
    usd: 0.1,
    unit: 'standard-resolution alarm-month',
    source: 'https://aws.amazon.com/cloudwatch/pricing/ (alarm metrics, standard resolution: $0.10)',
  },
  customMetricMonth: {
    usd: 0.3,
    unit: 'custom metric-month (first 10,000), prorated by the hour and metered only in hours that receive data',
    source:
      'https://aws.amazon.com/cloudwatch/pricing/ ("All custom metrics charges are prorated by the hour and metered only when you send metrics")',
  },
  dashboardMonth: {
    usd: 3,
    unit: 'dashboard-month beyond the first 3 of an account',
    source: 'https://aws.amazon.com/cloudwatch/pricing/ ($3.00 per dashboard per month)',
  },
  lambdaMillionRequests: {
    usd: 0.2,
    unit: 'million Lambda requests',
    source: 'https://aws.amazon.com/lambda/pricing/ ($0.20 per 1M requests)',
  },
  lambdaGbSecondArm: {
    usd: 0.0000133334,
    unit: 'GB-second (arm64)',
    source: 'https://aws.amazon.com/lambda/pricing/ (Arm: $0.0000133334 per GB-second, first 7.5B)',
  },
  ec2T4gNanoHour: {
    usd: 0.0042,
    unit: 't4g.nano instance-hour (fck-nat)',
    source:
      'https://aws.amazon.com/ec2/pricing/on-demand/ — also SST 4.17 sst.aws.Vpc docs ("t4g.nano … at $0.0042 per hour")',
  },
  ebsGp3GbMonth: {
    usd: 0.08,
    unit: 'GB-month of gp3 (the NAT instance root volume)',
    source: 'https://aws.amazon.com/ebs/pricing/ (gp3: $0.08 per GB-month)',
  },
  publicIpv4Hour: {
    usd: 0.005,
    unit: 'public IPv4 address-hour',
    source: 'https://aws.amazon.com/vpc/pricing/ (public IPv4 since 1 February 2024: $0.005 per IP per hour)',
  },
  natGatewayHour: {
    usd: 0.045,
    unit: 'NAT Gateway-hour',
    source: 'https://aws.amazon.com/vpc/pricing/ — also SST 4.17 sst.aws.Vpc docs ("$0.045 per hour")',
  },
  cloudMapNamespaceMonth: {
    usd: 0.5,
    unit: 'hosted zone-month (the Cloud Map namespace sst.aws.Vpc creates)',
    source:
      'https://aws.amazon.com/route53/pricing/ ($0.50 per hosted zone) — SST 4.17 sst.aws.Vpc docs ("$0.50 per month for the CloudMap hosted zone")',
  },
} as const satisfies Record<string, Price>;

/** The keys of {@link PRICES}. */
export type PriceKey = keyof typeof PRICES;
