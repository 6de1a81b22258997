/**
 * The idle cost infra prints (cost-plan.ts, prices.ts): the default plan stays within the budget with no
 * compute or network billed by the hour, the VPC + NAT layout costs what its parts cost, and the estimate notices
 * what keeps Aurora awake.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadDeployConfig } from '../../infra/config.ts';
import {
  CONFIG_MAX_AGE_MINUTES,
  formatIdleCost,
  idleSecretReads,
  NAT_INSTANCE_VOLUME_GB,
} from '../../infra/cost-plan.ts';
import { planDeployment } from '../../infra/plan.ts';
import { HOURS_PER_MONTH, PRICES, PRICES_CHECKED } from '../../infra/prices.ts';
import { aConfigInput, aDeployConfig } from './fixtures.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const planOf = (input: Record<string, unknown>) =>
  planDeployment(aDeployConfig(aConfigInput(input)), { app: 'queuebox', stage: 'prod', env: {} });

describe('idle cost', () => {
  it('of the shipped configuration (what npm run cost prints) is at most $4.00 a month, nothing by the hour', async () => {
    // Prepare
    const loaded = await loadDeployConfig({ root: ROOT, env: {} });

    // Act
    const plan = planDeployment(loaded, { app: 'queuebox', stage: 'dev', env: {} });
    const text = formatIdleCost(plan.idleCost);

    // Assess
    const alarmsAndMetrics = plan.idleCost.items
      .filter((i) => i.item.startsWith('CloudWatch'))
      .reduce((n, i) => n + i.monthlyUsd, 0);
    expect(plan.idleCost.totalUsd).toBeLessThanOrEqual(4);
    expect(plan.idleCost.totalUsd - alarmsAndMetrics).toBeLessThanOrEqual(1.5);
    expect(plan.idleCost.items.filter((i) => i.billing === 'hourly')).toEqual([]);
    expect(text.split('\n').at(-1)).toMatch(/^idle total: \$\d+\.\d\d\/month$/);
    expect(text.split('\n')[0]).toContain(PRICES_CHECKED);
  });

  it('of the default plan: ≤ $4.00 with the alarms, ≤ $1.50 without them and the secrets a configuration references', () => {
    // Act
    const plan = planOf({});
    const { idleCost } = plan;

    // Assess
    const alarmsAndMetrics = idleCost.items
      .filter((i) => i.item.startsWith('CloudWatch'))
      .reduce((n, i) => n + i.monthlyUsd, 0);
    // The fixture references two secrets (stripe#webhook, billing#whsec): $0.40 each, the user's own choice.
    const referenced = plan.secrets.managed.length * PRICES.secretMonth.usd;
    expect(plan.secrets.managed).toHaveLength(2);
    expect(idleCost.totalUsd).toBeLessThanOrEqual(4);
    expect(idleCost.totalUsd - alarmsAndMetrics - referenced).toBeLessThanOrEqual(1.5);
    expect(idleCost.auroraPausedShare).toBeGreaterThanOrEqual(0.9);
    expect(idleCost.items.filter((i) => i.billing === 'hourly')).toEqual([]);
  });

  it('rises by exactly the NAT instances, their addresses and volumes, the Cloud Map zone and the URL secret with a VPC', () => {
    // Prepare
    const azs = 2;
    const expected =
      azs *
        (HOURS_PER_MONTH * PRICES.ec2T4gNanoHour.usd +
          HOURS_PER_MONTH * PRICES.publicIpv4Hour.usd +
          NAT_INSTANCE_VOLUME_GB * PRICES.ebsGp3GbMonth.usd) +
      PRICES.cloudMapNamespaceMonth.usd +
      // With a connection the functions read a URL secret as well as Aurora's own, and read it in every idle tick.
      PRICES.secretMonth.usd +
      (idleSecretReads(planOf({}).schedules, 1) / 10_000) * PRICES.secretsManagerTenThousandCalls.usd -
      // …and no Data API requests.
      (planOf({}).idleCost.items.find((i) => i.item === 'RDS Data API requests')?.monthlyUsd ?? 0);

    // Act
    const outside = planOf({}).idleCost;
    const inVpc = planOf({ aws: { network: { functionsInVpc: true } } }).idleCost;

    // Assess
    expect(inVpc.totalUsd - outside.totalUsd).toBeCloseTo(expected, 6);
    expect(expected).toBeGreaterThan(15);
    expect(inVpc.items.filter((i) => i.billing === 'hourly').map((i) => i.item)).toEqual([
      'NAT instances (fck-nat t4g.nano)',
      'Public IPv4 addresses (NAT)',
    ]);
  });

  it('notices what keeps Aurora awake: a minute tick bills 0.5 ACU by the hour, minAcu above 0 too', () => {
    // Act
    const minuteTicks = planOf({ aws: { functions: { outboxTick: { rateMinutes: 1 } } } }).idleCost;
    const neverPauses = planOf({ aws: { database: { aurora: { minAcu: 1 } } } }).idleCost;
    const hourly = planOf({
      aws: { functions: { outboxTick: { rateMinutes: 60 }, relayTick: { rateMinutes: 60 } } },
    }).idleCost;

    // Assess
    const compute = (c: typeof minuteTicks) => c.items.find((i) => i.item === 'Aurora Serverless v2 compute');
    expect(compute(minuteTicks)).toMatchObject({ billing: 'hourly', monthlyUsd: 0.5 * 730 * 0.12 });
    expect(minuteTicks.totalUsd).toBeGreaterThan(40);
    expect(minuteTicks.auroraPausedShare).toBe(0);
    expect(compute(neverPauses)?.monthlyUsd).toBeCloseTo(730 * 0.12, 6);
    // Hourly safety ticks: 24 wakes a day of 6 minutes, still paused 90% of the day.
    expect(hourly.auroraPausedShare).toBeCloseTo(1 - (24 * 6) / 1440, 6);
    expect(compute(hourly)?.monthlyUsd).toBeCloseTo((24 * 6 * (730 / 24) * 0.5 * 0.12) / 60, 6);
  });

  it('counts overlapping wakes once: two 7-minute ticks, or 10 and 7, pause part of the day for less than never pausing', () => {
    // Prepare
    const days = HOURS_PER_MONTH / 24;
    const neverPausing = 0.5 * HOURS_PER_MONTH * PRICES.auroraServerlessV2AcuHour.usd;
    const compute = (c: { items: readonly { item: string; monthlyUsd: number; billing: string }[] }) =>
      c.items.find((i) => i.item === 'Aurora Serverless v2 compute');

    // Act
    const sevenAndSeven = planOf({
      aws: { functions: { outboxTick: { rateMinutes: 7 }, relayTick: { rateMinutes: 7 } } },
    }).idleCost;
    const tenAndSeven = planOf({
      aws: { functions: { outboxTick: { rateMinutes: 10 }, relayTick: { rateMinutes: 7 } } },
    }).idleCost;

    // Assess: a share of the day, and the compute of the minutes awake in it, never more than the whole day's.
    for (const cost of [sevenAndSeven, tenAndSeven]) {
      const share = cost.auroraPausedShare ?? Number.NaN;
      expect(share).toBeGreaterThan(0);
      expect(share).toBeLessThan(1);
      expect(compute(cost)?.billing).toBe('per-use');
      expect(compute(cost)?.monthlyUsd).toBeLessThan(neverPausing);
      expect(compute(cost)?.monthlyUsd).toBeCloseTo(
        (((1 - share) * 1440) / 60) * days * 0.5 * PRICES.auroraServerlessV2AcuHour.usd,
        6,
      );
    }
    // Every 7 minutes a wake keeps it up 6: at most one minute in 7 paused, whatever the second tick adds.
    expect(sevenAndSeven.auroraPausedShare).toBeLessThanOrEqual(1 / 7);
    expect(sevenAndSeven.auroraPausedShare).toBeGreaterThan(0.1);
  });

  it('bills wakes that leave no gap around the clock as never pausing, by the hour, like minAcu above 0', () => {
    // Act: every 6 minutes on the clock, 6-minute wakes; rate(7) ticks with pauseAfter 6, 7-minute wakes.
    const sixMinutes = planOf({ aws: { functions: { outboxTick: { rateMinutes: 6 } } } }).idleCost;
    const sevenPausingAfterSix = planOf({
      aws: {
        database: { aurora: { pauseAfterMinutes: 6 } },
        functions: { outboxTick: { rateMinutes: 7 }, relayTick: { rateMinutes: 7 } },
      },
    }).idleCost;

    // Assess
    for (const cost of [sixMinutes, sevenPausingAfterSix]) {
      const compute = cost.items.find((i) => i.item === 'Aurora Serverless v2 compute');
      expect(compute).toMatchObject({ billing: 'hourly' });
      expect(compute?.monthlyUsd).toBeCloseTo(
        0.5 * HOURS_PER_MONTH * PRICES.auroraServerlessV2AcuHour.usd,
        6,
      );
      expect(compute?.detail).toMatch(/^never pauses: /);
      expect(cost.auroraPausedShare).toBe(0);
    }
    expect(formatIdleCost(sixMinutes)).toContain('outbox-tick every 6 min');
  });

  it('names the tick that reaches Aurora exactly every pauseAfterMinutes as what keeps it awake', () => {
    // Act: pauseAfterMinutes is 5 by default.
    const compute = planOf({ aws: { functions: { outboxTick: { rateMinutes: 5 } } } }).idleCost.items.find(
      (i) => i.item === 'Aurora Serverless v2 compute',
    );

    // Assess
    expect(compute?.billing).toBe('hourly');
    expect(compute?.detail).toContain('outbox-tick every 5 min reach(es) it within pauseAfter (5 min)');
  });

  it('counts each rate() tick as its own wakes, apart from the ticks on the clock and from each other', () => {
    // Act: rate(7 minutes) for both (206 runs a day each), cron for maintenance (midnight).
    const compute = planOf({
      aws: { functions: { outboxTick: { rateMinutes: 7 }, relayTick: { rateMinutes: 7 } } },
    }).idleCost.items.find((i) => i.item === 'Aurora Serverless v2 compute');

    // Assess
    expect(compute?.detail).toContain(`${2 * 206 + 1} safety-tick wake(s)/day`);
  });

  it('prices the scheduled ticks at their function memory', () => {
    // Prepare
    const lambda = (memoryMb: number) =>
      planOf({ aws: { functions: { outboxTick: { rateMinutes: 1, memoryMb } } } }).idleCost.items.find(
        (i) => i.item === 'Lambda (scheduled ticks)',
      )?.monthlyUsd ?? 0;

    // Act
    const small = lambda(512);
    const large = lambda(2048);

    // Assess: 1440 half-second runs a day at 1.5 GB more.
    expect(large - small).toBeCloseTo(
      1440 * (HOURS_PER_MONTH / 24) * 0.5 * 1.5 * PRICES.lambdaGbSecondArm.usd,
      6,
    );
  });

  it('meters both gauges of each table in every hour a safety tick samples them, the inbox by outbox-tick where no relay-tick runs', () => {
    // Act
    const metrics = (input: Record<string, unknown>) =>
      planOf(input).idleCost.items.find((i) => i.item === 'CloudWatch custom metrics');
    const byDefault = metrics({});
    const hourly = metrics({
      aws: { functions: { outboxTick: { rateMinutes: 60 }, relayTick: { rateMinutes: 60 } } },
    });
    // No relay-tick (the relay off): outbox-tick samples the inbox, hourly here, relay-tick's rate unused.
    const noRelay = planOf({
      inbox: { relay: { enabled: false } },
      aws: { functions: { outboxTick: { rateMinutes: 60 }, relayTick: { rateMinutes: 360 } } },
    });

    // Assess
    const days = HOURS_PER_MONTH / 24;
    const price = PRICES.customMetricMonth.usd / HOURS_PER_MONTH;
    // Default: ticks every 6 h on the clock (4 hours a day, maintenance's midnight among them): four series.
    expect(byDefault?.monthlyUsd).toBeCloseTo(4 * 4 * days * price, 6);
    // Hourly ticks: every series has data in every hour of the month.
    expect(hourly?.monthlyUsd).toBeCloseTo(4 * HOURS_PER_MONTH * price, 6);
    expect(noRelay.functions.map((f) => f.name)).not.toContain('relay-tick');
    const noRelayMetrics = noRelay.idleCost.items.find((i) => i.item === 'CloudWatch custom metrics');
    expect(noRelayMetrics?.monthlyUsd).toBeCloseTo(4 * HOURS_PER_MONTH * price, 6);
    expect(noRelayMetrics?.detail).toContain('DeadRows inbox 730 h');
  });

  it('bills no per-destination counter while idle, and prints what traffic adds from the price table', () => {
    // Act
    const one = planOf({}).idleCost;
    const fixture = aConfigInput().destinations as Record<string, unknown>;
    const three = planOf({
      destinations: {
        ...fixture,
        crm: { type: 'http', url: 'https://crm.example/hooks' },
        audit: { type: 'http', url: 'https://audit.example/hooks' },
      },
    }).idleCost;

    // Assess: the same idle total whatever the number of destinations.
    expect(three.totalUsd).toBeCloseTo(one.totalUsd, 6);
    const line = three.items.find((i) => i.item === 'CloudWatch per-destination counters');
    expect(line).toMatchObject({ monthlyUsd: 0, billing: 'per-use' });
    // Busy: one Sent series per delivering destination, at most 3 series each (Sent, Retried, Dead).
    const perSeries = PRICES.customMetricMonth.usd;
    expect(line?.detail).toContain(`$${(3 * perSeries).toFixed(2)}/month if every destination delivers`);
    expect(line?.detail).toContain(`at most $${(9 * perSeries).toFixed(2)}/month (9 series)`);
  });

  it('counts the admin-failures alarm: one alarm more than the gauges, heartbeat, ingest failures and errors', () => {
    // Act
    const plan = planOf({});
    const alarms = plan.idleCost.items.find((i) => i.item === 'CloudWatch alarms');

    // Assess
    expect(plan.alarms.alarms.map((a) => a.name)).toContain('queuebox-prod-admin-failures');
    expect(alarms?.monthlyUsd).toBeCloseTo(plan.alarms.alarms.length * PRICES.alarmMonth.usd, 6);
    expect(alarms?.detail).toContain('admin failures');
  });

  it('counts the dashboard only when it is asked for', () => {
    const without = planOf({}).idleCost;
    const withDashboard = planOf({ aws: { dashboard: true } }).idleCost;

    expect(withDashboard.totalUsd - without.totalUsd).toBeCloseTo(PRICES.dashboardMonth.usd, 6);
  });

  it('counts the GetSecretValue calls of the idle ticks: every secret:// name per run, a warm instance once in 5 min', async () => {
    // Prepare
    const { CONFIG_MAX_AGE_MS } = await import('../../functions/lambda-shell/lambda.ts');
    const daily = 1440 * (HOURS_PER_MONTH / 24);
    const call = PRICES.secretsManagerTenThousandCalls.usd / 10_000;

    // Act
    const shipped = planDeployment(await loadDeployConfig({ root: ROOT, env: {} }), {
      app: 'queuebox',
      stage: 'dev',
      env: {},
    }).idleCost;
    const sixHours = planOf({}).idleCost;
    const everyMinute = planOf({ aws: { functions: { outboxTick: { rateMinutes: 1 } } } }).idleCost;
    const line = (c: typeof sixHours) => c.items.find((i) => i.item === 'Secrets Manager API calls');

    // Assess: the fixture's two names (stripe, billing); ticks hours apart start cold and read both on every run
    expect(CONFIG_MAX_AGE_MINUTES * 60_000).toBe(CONFIG_MAX_AGE_MS);
    const sixHourRuns = (2 * daily) / 360 + daily / 1440;
    expect(line(sixHours)).toMatchObject({
      billing: 'per-use',
      monthlyUsd: expect.closeTo(2 * sixHourRuns * call, 9),
    });
    expect(line(sixHours)?.detail).toMatch(/^≈ 548 GetSecretValue\/month: 2 secret name\(s\)/);
    // A minute outbox-tick stays warm and reads them on every fifth run.
    const minuteRuns = daily / 5 + daily / 360 + daily / 1440;
    expect(line(everyMinute)?.monthlyUsd).toBeCloseTo(2 * minuteRuns * call, 9);
    // The shipped configuration reads no secret (the Data API reads Aurora's itself): no line, the same total.
    expect(line(shipped)).toBeUndefined();
  });
});
