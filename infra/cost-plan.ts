import type { FunctionName } from '@queuebox/deploy-contract';
import type { DatabasePlan } from './database-plan.ts';
import type { NetworkPlan } from './network-plan.ts';
import { HOURS_PER_MONTH, PRICES, PRICES_CHECKED, PRICES_REGION } from './prices.ts';
import { DATABASE_TICKS, type SchedulePlan } from './schedules-plan.ts';

// What the planned install costs a month while it receives nothing, item by item, from the price table in
// prices.ts. Pure: `sst deploy` prints it for the plan it is about to apply, `npm run cost` for the shipped
// configuration, and test/infra/cost.test.ts holds the default under its budget.

/** How an item is billed while idle. */
export type IdleBilling =
  /** Billed for every hour it exists, traffic or not (compute or network by the hour). */
  | 'hourly'
  /** A flat monthly charge (secrets, alarms, storage, a dashboard). */
  | 'monthly'
  /** Only what the idle schedules themselves use (ticks, the database woken by them, their metrics). */
  | 'per-use';

/** One line of the estimate. */
export interface IdleCostItem {
  readonly item: string;
  readonly detail: string;
  readonly monthlyUsd: number;
  readonly billing: IdleBilling;
}

/** The estimate. */
export interface IdleCost {
  readonly items: readonly IdleCostItem[];
  readonly totalUsd: number;
  /** Share of an idle month a pausable Aurora spends paused (null without Aurora or with `minAcu` above 0). */
  readonly auroraPausedShare: number | null;
}

/** The part of a deployment plan the estimate reads. */
export interface IdleCostInput {
  readonly network: NetworkPlan;
  readonly database: DatabasePlan;
  readonly schedules: readonly SchedulePlan[];
  readonly functions: readonly { readonly name: FunctionName; readonly memoryMb: number }[];
  /** Secrets Manager secrets infra creates for `secret://` references. */
  readonly managedSecrets: number;
  /**
   * Secret names every function's loadConfig() reads with GetSecretValue (each `secret://` name once, the database
   * URL's secret included; not the Data API's, which the Data API reads itself). Default 0.
   */
  readonly secretNamesRead?: number;
  readonly alarms: number;
  readonly dashboard: boolean;
  /** Configured destinations: each may carry outbox-tick's per-destination counters while it delivers. */
  readonly destinations: number;
}

/** Days in the 730-hour month of the price pages. */
const DAYS_PER_MONTH = HOURS_PER_MONTH / 24;

/** Storage an idle install's Aurora cluster holds (an empty schema, the catalogs, a little WAL): an assumption. */
export const AURORA_IDLE_STORAGE_GB = 1;

/** Smallest capacity of an awake Aurora Serverless v2 instance. */
const AWAKE_MIN_ACU = 0.5;

/** Root volume of a fck-nat instance, in GB (gp3): an assumption, the AMI's default size. */
export const NAT_INSTANCE_VOLUME_GB = 8;

/**
 * Data API calls of one idle tick (the oldest-pending sample, reclaim, claim, next due; maintenance a few more),
 * rounded up.
 */
const CALLS_PER_IDLE_TICK = 7;

/**
 * Minutes a warm function instance uses its configuration before it reads it, and every secret in it, again
 * (functions/lambda-shell/lambda.ts `CONFIG_MAX_AGE_MS`; test/infra/cost.test.ts keeps the two equal).
 */
export const CONFIG_MAX_AGE_MINUTES = 5;

/**
 * GetSecretValue calls a month of the idle ticks: every run of a tick reads each of `names` once when its instance
 * read them {@link CONFIG_MAX_AGE_MINUTES} or more ago, whether it starts cold (runs hours apart: Lambda has reclaimed
 * the instance) or warm (the age check); runs closer together share one read, so a tick every `n` < 5 minutes reads
 * on every ⌈5 / n⌉-th run (one warm instance, as the ticks' reserved concurrency and idle drains give).
 */
export function idleSecretReads(schedules: readonly SchedulePlan[], names: number): number {
  return configReadingTicks(schedules).reduce(
    (n, s) =>
      n +
      ((1440 / s.rateMinutes) * DAYS_PER_MONTH * names) / Math.ceil(CONFIG_MAX_AGE_MINUTES / s.rateMinutes),
    0,
  );
}

/**
 * The ticks that load the configuration (and read its secrets): all but source-check, which only lists event source
 * mappings (functions/source-check.ts).
 */
function configReadingTicks(schedules: readonly SchedulePlan[]): SchedulePlan[] {
  return schedules.filter((s) => s.function !== 'source-check');
}

/** Billed duration of one idle tick on Lambda, in seconds (a few queries), rounded up. */
const IDLE_TICK_SECONDS = 0.5;

/**
 * The gauge series the alarms read while idle, and the ticks that send each: both gauges of both tables come from
 * maintenance-tick, those of the outbox also from every outbox-tick and those of the inbox from every relay-tick
 * (sampled before each drain), or from every outbox-tick when the install has no relay-tick (no push source, or the
 * relay off: outbox-tick samples the inbox then). Busy hours add the functions that change the tables.
 */
function gaugeSenders(
  relayTick: boolean,
): readonly { readonly series: string; readonly ticks: readonly FunctionName[] }[] {
  const inbox: FunctionName = relayTick ? 'relay-tick' : 'outbox-tick';
  return [
    { series: 'DeadRows outbox', ticks: ['maintenance-tick', 'outbox-tick'] },
    { series: 'DeadRows inbox', ticks: ['maintenance-tick', inbox] },
    { series: 'OldestPendingAgeSeconds outbox', ticks: ['maintenance-tick', 'outbox-tick'] },
    { series: 'OldestPendingAgeSeconds inbox', ticks: ['maintenance-tick', inbox] },
  ];
}

/**
 * Series outbox-tick sends per destination (`Sent`, `Retried`, `Dead` with `{ service, Destination }`), each only in
 * the hours a drain settled rows of that destination: never while idle.
 */
export const PER_DESTINATION_SERIES = 3;

/**
 * The minutes of a day on which `schedule` fires: schedules on the clock (`cron`) fire on multiples of their rate
 * from midnight, so equal rates share their minutes; a `rate(…)` has an unknown phase and is counted apart.
 */
function minutesOfDay(schedule: SchedulePlan, index: number): number[] {
  const runs = Math.max(1, Math.ceil(1440 / schedule.rateMinutes));
  const offset = schedule.expression.startsWith('cron(') ? 0 : 0.5 + index / 100;
  return Array.from({ length: runs }, (_, i) => i * schedule.rateMinutes + offset);
}

/** Hours of a day in which at least one of `schedules` fires (indexes as in the whole schedule list). */
function hoursOfDay(schedules: readonly { schedule: SchedulePlan; index: number }[]): number {
  return new Set(
    schedules.flatMap(({ schedule, index }) => minutesOfDay(schedule, index).map((m) => Math.floor(m / 60))),
  ).size;
}

/**
 * Minutes of a day an Aurora woken at each of `wakeMinutes` stays up, each wake keeping it awake for `windowMinutes`
 * from the minute it comes: the union of the windows, so overlapping wakes count once. The day repeats, so a window
 * past midnight continues at the start of the day; at most 1440.
 */
function awakeMinutesOfDay(wakeMinutes: readonly number[], windowMinutes: number): number {
  const windows = wakeMinutes.flatMap((m): [number, number][] => {
    const start = ((m % 1440) + 1440) % 1440;
    const end = start + Math.min(windowMinutes, 1440);
    return end <= 1440
      ? [[start, end]]
      : [
          [start, 1440],
          [0, end - 1440],
        ];
  });
  windows.sort((a, b) => a[0] - b[0]);
  let awake = 0;
  let upTo = 0;
  for (const [start, end] of windows) {
    if (end <= upTo) continue;
    awake += end - Math.max(start, upTo);
    upTo = end;
  }
  return Math.min(1440, awake);
}

function usd(n: number): string {
  return `$${n.toFixed(2)}`;
}

/** The itemized idle cost of `input` (see the file comment). */
export function planIdleCost(input: IdleCostInput): IdleCost {
  const items: IdleCostItem[] = [];
  const ticks = input.schedules;
  const tickRunsPerMonth = ticks.reduce((n, s) => n + (1440 / s.rateMinutes) * DAYS_PER_MONTH, 0);
  let auroraPausedShare: number | null = null;

  const { database } = input;
  if (database.kind === 'aurora') {
    const { aurora } = database;
    const acuHour = PRICES.auroraServerlessV2AcuHour.usd;
    const dbTicks = ticks.filter((s) => DATABASE_TICKS.includes(s.function));
    const keepAwake = dbTicks.filter((s) => s.rateMinutes <= aurora.pauseAfterMinutes);
    if (aurora.minAcu > 0) {
      items.push({
        item: 'Aurora Serverless v2 compute',
        detail: `minAcu ${aurora.minAcu}: never pauses, ${aurora.minAcu} ACU × ${HOURS_PER_MONTH} h`,
        monthlyUsd: aurora.minAcu * HOURS_PER_MONTH * acuHour,
        billing: 'hourly',
      });
    } else if (keepAwake.length > 0) {
      auroraPausedShare = 0;
      items.push({
        item: 'Aurora Serverless v2 compute',
        detail: `never pauses: ${keepAwake.map((s) => `${s.function} every ${s.rateMinutes} min`).join(', ')} reach(es) it within pauseAfter (${aurora.pauseAfterMinutes} min); ${AWAKE_MIN_ACU} ACU × ${HOURS_PER_MONTH} h`,
        monthlyUsd: AWAKE_MIN_ACU * HOURS_PER_MONTH * acuHour,
        billing: 'hourly',
      });
    } else {
      const wakeMinutes = [...new Set(dbTicks.flatMap((s, i) => minutesOfDay(s, i)))];
      const wakesPerDay = wakeMinutes.length;
      // Each wake keeps the cluster up for pauseAfter minutes after the last call, plus the minute of the tick;
      // wakes closer together than that overlap, and the cluster is up for their union, never more than the day.
      const awakeWindow = aurora.pauseAfterMinutes + 1;
      const awakeMinutesPerDay = awakeMinutesOfDay(wakeMinutes, awakeWindow);
      if (awakeMinutesPerDay >= 1440) {
        auroraPausedShare = 0;
        items.push({
          item: 'Aurora Serverless v2 compute',
          detail: `never pauses: the wakes of ${dbTicks.map((s) => `${s.function} every ${s.rateMinutes} min`).join(', ')} (${wakesPerDay}/day × ${awakeWindow} min) overlap around the clock; ${AWAKE_MIN_ACU} ACU × ${HOURS_PER_MONTH} h`,
          monthlyUsd: AWAKE_MIN_ACU * HOURS_PER_MONTH * acuHour,
          billing: 'hourly',
        });
      } else {
        auroraPausedShare = 1 - awakeMinutesPerDay / 1440;
        items.push({
          item: 'Aurora Serverless v2 compute',
          detail: `paused ${(auroraPausedShare * 100).toFixed(1)}% of an idle day: ${wakesPerDay} safety-tick wake(s)/day × ${awakeWindow} min at ${AWAKE_MIN_ACU} ACU${awakeMinutesPerDay < wakesPerDay * awakeWindow ? ` (overlapping: ${Math.round(awakeMinutesPerDay)} min/day awake)` : ''}`,
          monthlyUsd: (awakeMinutesPerDay / 60) * DAYS_PER_MONTH * AWAKE_MIN_ACU * acuHour,
          billing: 'per-use',
        });
      }
    }
    items.push({
      item: 'Aurora storage',
      detail: `≈ ${AURORA_IDLE_STORAGE_GB} GB of an idle cluster (assumed)`,
      monthlyUsd: AURORA_IDLE_STORAGE_GB * PRICES.auroraStorageGbMonth.usd,
      billing: 'monthly',
    });
    if (database.access === 'data-api') {
      const calls =
        dbTicks.reduce((n, s) => n + (1440 / s.rateMinutes) * DAYS_PER_MONTH, 0) * CALLS_PER_IDLE_TICK;
      items.push({
        item: 'RDS Data API requests',
        detail: `≈ ${Math.round(calls)} calls/month of the safety ticks`,
        monthlyUsd: (calls / 1e6) * PRICES.dataApiMillionRequests.usd,
        billing: 'per-use',
      });
    }
  }

  const databaseSecrets = database.kind === 'aurora' ? (database.access === 'connection' ? 2 : 1) : 0;
  const secrets = databaseSecrets + input.managedSecrets;
  if (secrets > 0) {
    items.push({
      item: 'Secrets Manager',
      detail: `${secrets} secret(s): ${databaseSecrets > 0 ? `Aurora's master secret${databaseSecrets > 1 ? ' and the URL secret' : ''}` : 'none for the database (yours)'}, ${input.managedSecrets} for secret:// references`,
      monthlyUsd: secrets * PRICES.secretMonth.usd,
      billing: 'monthly',
    });
  }

  const names = input.secretNamesRead ?? 0;
  if (names > 0 && configReadingTicks(ticks).length > 0) {
    const calls = idleSecretReads(ticks, names);
    items.push({
      item: 'Secrets Manager API calls',
      detail: `≈ ${Math.round(calls)} GetSecretValue/month: ${names} secret name(s) read by each idle tick run that starts cold or finds them ${CONFIG_MAX_AGE_MINUTES} min old (every run when ticks are ≥ ${CONFIG_MAX_AGE_MINUTES} min apart, an upper bound; closer ticks share one read per ${CONFIG_MAX_AGE_MINUTES} min of a warm instance)${database.kind === 'aurora' && database.access === 'data-api' ? "; the Data API's own reads of Aurora's secret not counted" : ''}`,
      monthlyUsd: (calls / 10_000) * PRICES.secretsManagerTenThousandCalls.usd,
      billing: 'per-use',
    });
  }

  const memory = new Map(input.functions.map((f) => [f.name, f.memoryMb]));
  const gbSeconds = ticks.reduce(
    (n, s) =>
      n +
      (1440 / s.rateMinutes) * DAYS_PER_MONTH * ((memory.get(s.function) ?? 512) / 1024) * IDLE_TICK_SECONDS,
    0,
  );
  items.push({
    item: 'Lambda (scheduled ticks)',
    detail: `≈ ${Math.round(tickRunsPerMonth)} invocations/month: ${ticks.map((s) => `${s.function} every ${s.rateMinutes} min`).join(', ') || 'none'}`,
    monthlyUsd:
      (tickRunsPerMonth / 1e6) * PRICES.lambdaMillionRequests.usd + gbSeconds * PRICES.lambdaGbSecondArm.usd,
    billing: 'per-use',
  });

  if (input.alarms > 0) {
    items.push({
      item: 'CloudWatch alarms',
      detail: `${input.alarms} alarm(s): dead rows and oldest pending age per table, new dead rows, the gauge heartbeat, ingest failures, admin failures, the age of each SQS source queue, source problems (Kafka / Amazon MQ), function errors`,
      monthlyUsd: input.alarms * PRICES.alarmMonth.usd,
      billing: 'monthly',
    });
    // Metered per hour with data: a series sent by several ticks in one hour counts that hour once.
    const indexed = ticks.map((schedule, index) => ({ schedule, index }));
    const relayTick = ticks.some((schedule) => schedule.function === 'relay-tick');
    const series = gaugeSenders(relayTick).map(({ series, ticks: senders }) => {
      const hoursPerDay = hoursOfDay(indexed.filter(({ schedule }) => senders.includes(schedule.function)));
      return { series, hours: Math.min(HOURS_PER_MONTH, hoursPerDay * DAYS_PER_MONTH) };
    });
    const gaugeHours = series.reduce((n, s) => n + s.hours, 0);
    items.push({
      item: 'CloudWatch custom metrics',
      detail: `${series.length} gauge series when idle, sent ${series.map((s) => `${s.series} ${Math.round(s.hours)} h`).join(', ')} a month (metered per hour with data); counters are not sent at 0${ticks.some((s) => s.function === 'source-check') ? ` (source-check's SourceProblems only while a mapping cannot poll: ${usd(PRICES.customMetricMonth.usd)}/month if one never can)` : ''}`,
      monthlyUsd: (gaugeHours / HOURS_PER_MONTH) * PRICES.customMetricMonth.usd,
      billing: 'per-use',
    });
  }
  if (input.destinations > 0) {
    // Not an idle cost: shown so that what traffic adds is read from the same price table, not guessed.
    const series = PER_DESTINATION_SERIES * input.destinations;
    const delivering = input.destinations * PRICES.customMetricMonth.usd;
    items.push({
      item: 'CloudWatch per-destination counters',
      detail: `never sent while idle; with traffic, Sent / Retried / Dead by Destination for ${input.destinations} destination(s), metered per hour with data: ${usd(delivering)}/month if every destination delivers in every hour, at most ${usd(series * PRICES.customMetricMonth.usd)}/month (${series} series) if each also retries and dead-letters rows in every hour`,
      monthlyUsd: 0,
      billing: 'per-use',
    });
  }
  if (input.dashboard) {
    items.push({
      item: 'CloudWatch dashboard',
      detail: 'aws.dashboard: true (free only among an account’s first 3)',
      monthlyUsd: PRICES.dashboardMonth.usd,
      billing: 'monthly',
    });
  }

  const { network } = input;
  if (network.kind === 'outside') {
    items.push({
      item: 'Network',
      detail: `functions outside any VPC; Aurora in ${network.azs} isolated subnets (VPC, subnets, security group: free), no NAT`,
      monthlyUsd: 0,
      billing: 'monthly',
    });
  } else if (network.kind === 'create') {
    if (network.nat === 'ec2') {
      items.push({
        item: 'NAT instances (fck-nat t4g.nano)',
        detail: `${network.azs} × ${HOURS_PER_MONTH} h`,
        monthlyUsd: network.azs * HOURS_PER_MONTH * PRICES.ec2T4gNanoHour.usd,
        billing: 'hourly',
      });
      items.push({
        item: 'NAT instance volumes (gp3)',
        detail: `${network.azs} × ${NAT_INSTANCE_VOLUME_GB} GB (assumed)`,
        monthlyUsd: network.azs * NAT_INSTANCE_VOLUME_GB * PRICES.ebsGp3GbMonth.usd,
        billing: 'monthly',
      });
    } else {
      items.push({
        item: 'NAT Gateways',
        detail: `${network.azs} × ${HOURS_PER_MONTH} h, plus $0.045/GB processed`,
        monthlyUsd: network.azs * HOURS_PER_MONTH * PRICES.natGatewayHour.usd,
        billing: 'hourly',
      });
    }
    items.push({
      item: 'Public IPv4 addresses (NAT)',
      detail: `${network.azs} × ${HOURS_PER_MONTH} h`,
      monthlyUsd: network.azs * HOURS_PER_MONTH * PRICES.publicIpv4Hour.usd,
      billing: 'hourly',
    });
    items.push({
      item: 'Cloud Map namespace of the VPC',
      detail: 'one private hosted zone (sst.aws.Vpc)',
      monthlyUsd: PRICES.cloudMapNamespaceMonth.usd,
      billing: 'monthly',
    });
  } else {
    items.push({
      item: 'Network',
      detail:
        'your subnets (aws.network.existing): their NAT or endpoints are billed to you, not counted here',
      monthlyUsd: 0,
      billing: 'monthly',
    });
  }

  const totalUsd = items.reduce((n, i) => n + i.monthlyUsd, 0);
  return { items, totalUsd, auroraPausedShare };
}

/**
 * The estimate as text: a header with the price table's date, one line per item, and last the line
 * `idle total: $X.XX/month`.
 */
export function formatIdleCost(cost: IdleCost): string {
  const width = Math.max(...cost.items.map((i) => i.item.length));
  const lines = [
    `QueueBox idle cost of this plan (${PRICES_REGION} list prices checked ${PRICES_CHECKED}, infra/prices.ts; no free tier):`,
    ...cost.items.map(
      (i) =>
        `  ${i.item.padEnd(width)}  ${usd(i.monthlyUsd).padStart(7)}/month  ${i.billing.padEnd(8)}  ${i.detail}`,
    ),
    `idle total: ${usd(cost.totalUsd)}/month`,
  ];
  return lines.join('\n');
}
