import { periodicTickAt } from '@queuebox/wake-ups';
import { describe, expect, it } from 'vitest';
import { planDatabase } from '../../infra/database-plan.ts';
import { InfraPlanError } from '../../infra/errors.ts';
import { planFunctions } from '../../infra/functions-plan.ts';
import { planDeployment } from '../../infra/plan.ts';
import { planIdleWarnings, planSchedules, scheduleExpression } from '../../infra/schedules-plan.ts';
import { aConfig, aConfigInput, aDeployConfig, aNatsSource, anHttpSource } from './fixtures.ts';

describe('planSchedules', () => {
  it('schedules every tick at its configured rate', () => {
    // Prepare
    const config = aConfig({
      sources: { stripe: anHttpSource(), audit: aNatsSource() },
      aws: { functions: { relayTick: { rateMinutes: 30 }, maintenanceTick: { rateMinutes: 60 } } },
    });

    // Act
    const schedules = planSchedules(planFunctions(config));

    // Assess
    expect(schedules.map((s) => [s.function, s.expression])).toEqual([
      // The safety tick's default: every 6 h, on the clock.
      ['outbox-tick', 'cron(0 0/6 * * ? *)'],
      ['relay-tick', 'cron(0/30 * * * ? *)'],
      ['maintenance-tick', 'cron(0 * * * ? *)'],
      ['nats-source-tick', 'rate(1 minute)'],
    ]);
  });

  it('aligns rates that divide an hour or a day to the clock, so equal ticks fire together', () => {
    expect(scheduleExpression(1)).toBe('rate(1 minute)');
    expect(scheduleExpression(15)).toBe('cron(0/15 * * * ? *)');
    expect(scheduleExpression(60)).toBe('cron(0 * * * ? *)');
    expect(scheduleExpression(120)).toBe('cron(0 0/2 * * ? *)');
    expect(scheduleExpression(1440)).toBe('cron(0 0 * * ? *)');
    expect(scheduleExpression(7)).toBe('rate(7 minutes)');
    expect(scheduleExpression(90)).toBe('rate(90 minutes)');
    expect(() => scheduleExpression(0.5)).toThrow(InfraPlanError);
  });

  it('puts on the clock exactly the rates a deferred tick counts on (periodicTickAt), every rate of a day', () => {
    // Prepare: midnight UTC, a minute every tick on the clock fires in.
    const midnight = Date.parse('2026-11-30T00:00:00Z');
    // Act
    const disagreeing = Array.from({ length: 1440 }, (_, i) => i + 1).filter((rate) => {
      const onClock = rate === 1 || scheduleExpression(rate).startsWith('cron(');
      return periodicTickAt(midnight, rate) !== onClock;
    });
    // Assess
    expect(disagreeing).toEqual([]);
  });
});

describe('planIdleWarnings', () => {
  const aurora = (aurora: Record<string, unknown> = {}) =>
    planDatabase(aConfig({ aws: { database: { aurora } } }), undefined, 'qb/dev');

  it('warns when a schedule reaches a pausable Aurora more often than it pauses', () => {
    // Prepare
    const schedules = planSchedules(
      planFunctions(
        aConfig({
          aws: {
            functions: {
              outboxTick: { rateMinutes: 1 },
              relayTick: { rateMinutes: 1 },
              maintenanceTick: { rateMinutes: 5 },
            },
          },
        }),
      ),
    );

    // Act
    const warnings = planIdleWarnings(aurora(), schedules);

    // Assess
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /outbox-tick every 1 min, relay-tick every 1 min, maintenance-tick every 5 min/,
    );
  });

  it('warns of a rate one minute above the pause too, which the idle cost bills around the clock', () => {
    // Prepare: pause 5 min; a wake keeps Aurora up for the tick's minute and 5 more, so every 6 min never pauses
    const at = (rateMinutes: number) =>
      planSchedules(planFunctions(aConfig({ aws: { functions: { outboxTick: { rateMinutes } } } })));

    // Act: the warning said nothing at 6 while the cost said "never pauses"
    const six = planIdleWarnings(aurora({ pauseAfterMinutes: 5 }), at(6));
    const seven = planIdleWarnings(aurora({ pauseAfterMinutes: 5 }), at(7));

    // Assess
    expect(six).toEqual([expect.stringMatching(/outbox-tick every 6 min keep\(s\) it awake/)]);
    expect(seven).toEqual([]);
  });

  it('does not count nats-source-tick, which touches the database only when messages arrive (as the cost does)', () => {
    // Prepare: the shipped rates (safety ticks every 6 h, maintenance daily) and a NATS source pulled every minute
    const input = aConfigInput({ sources: { stripe: anHttpSource(), audit: aNatsSource() } });

    // Act
    const plan = planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });

    // Assess
    expect(plan.schedules.find((s) => s.function === 'nats-source-tick')?.rateMinutes).toBe(1);
    expect(plan.warnings.filter((w) => /Aurora pauses/.test(w))).toEqual([]);
    const compute = plan.idleCost.items.find((i) => i.item === 'Aurora Serverless v2 compute');
    expect(compute?.billing).not.toBe('hourly');
  });

  it('stays quiet when every tick is slower than the pause, or the database cannot pause anyway', () => {
    // Prepare
    const slow = planSchedules(
      planFunctions(
        aConfig({
          aws: {
            functions: {
              outboxTick: { rateMinutes: 30 },
              relayTick: { rateMinutes: 30 },
              maintenanceTick: { rateMinutes: 60 },
            },
          },
        }),
      ),
    );
    const fast = planSchedules(planFunctions(aConfig()));

    // Act / Assess
    expect(planIdleWarnings(aurora(), slow)).toEqual([]);
    expect(planIdleWarnings(aurora({ minAcu: 0.5 }), fast)).toEqual([]);
  });
});
