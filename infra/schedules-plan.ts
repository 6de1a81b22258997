import type { FunctionName } from '@queuebox/deploy-contract';
import type { DatabasePlan } from './database-plan.ts';
import { InfraPlanError } from './errors.ts';
import type { FunctionPlan } from './functions-plan.ts';

// The periodic safety ticks, and what their rates do to a pausable Aurora. Pure.

/** One EventBridge schedule of a tick. */
export interface SchedulePlan {
  readonly id: string;
  readonly function: FunctionName;
  readonly rateMinutes: number;
  /** `rate(1 minute)`, `cron(0/15 * * * ? *)`, `rate(7 minutes)`. */
  readonly expression: `rate(${string})` | `cron(${string})`;
}

/**
 * The EventBridge expression for a tick every `minutes`. Rates that divide an hour (or a day, in whole hours) become
 * cron expressions on wall-clock boundaries, so ticks with equal rates fire in the same minute and a pausable
 * database wakes once for all of them instead of once per schedule; other rates stay `rate(…)`.
 */
export function scheduleExpression(minutes: number): `rate(${string})` | `cron(${string})` {
  if (!Number.isInteger(minutes) || minutes < 1) {
    throw new InfraPlanError(
      `a schedule rate must be a whole number of minutes, at least 1 (got ${minutes})`,
    );
  }
  if (minutes === 1) return 'rate(1 minute)';
  if (minutes < 60 && 60 % minutes === 0) return `cron(0/${minutes} * * * ? *)`;
  if (minutes === 60) return 'cron(0 * * * ? *)';
  if (minutes === 1440) return 'cron(0 0 * * ? *)';
  if (minutes % 60 === 0 && 1440 % minutes === 0) return `cron(0 0/${minutes / 60} * * ? *)`;
  return `rate(${minutes} minutes)`;
}

/** One schedule per planned tick function, at its `aws.functions.<tick>.rateMinutes`. */
export function planSchedules(functions: readonly FunctionPlan[]): SchedulePlan[] {
  return functions
    .filter((f): f is FunctionPlan & { rateMinutes: number } => f.rateMinutes !== undefined)
    .map((f) => ({
      id: `${f.id}Schedule`,
      function: f.name,
      rateMinutes: f.rateMinutes,
      expression: scheduleExpression(f.rateMinutes),
    }));
}

/**
 * Ticks that read the database on every run. nats-source-tick is not one: it touches the database only when its
 * pull brought messages (with the Data API there is no connection to hold), so an idle one lets Aurora pause.
 * The idle warnings here and the cost estimate (cost-plan.ts) count the same ticks.
 */
export const DATABASE_TICKS: readonly FunctionName[] = ['outbox-tick', 'relay-tick', 'maintenance-tick'];

/**
 * Warnings about a pausable Aurora that will not pause: any schedule of a {@link DATABASE_TICKS} tick that reaches
 * the database at least once per `pauseAfterMinutes` keeps it awake (and billing at least minimum capacity) around
 * the clock.
 */
export function planIdleWarnings(database: DatabasePlan, schedules: readonly SchedulePlan[]): string[] {
  if (database.kind !== 'aurora' || database.aurora.minAcu > 0) return [];
  const pause = database.aurora.pauseAfterMinutes;
  // A wake keeps it up for the tick's minute and `pause` more (the cost plan's model): a rate within that keeps it up.
  const awake = schedules.filter((s) => DATABASE_TICKS.includes(s.function) && s.rateMinutes <= pause + 1);
  if (awake.length === 0) return [];
  const list = awake.map((s) => `${s.function} every ${s.rateMinutes} min`).join(', ');
  return [
    `Aurora pauses after ${pause} min without connections, but ${list} keep(s) it awake: the database bills its minimum capacity around the clock. Raise aws.functions.<tick>.rateMinutes above ${pause + 1} (wake-ups still start drains when work arrives) or accept the cost; see infra/README.md "Idle cost".`,
  ];
}
