import { createHash } from 'node:crypto';
import { AWS_CLIENT_DEFAULTS } from '@queuebox/config';
import type { Clock } from '@queuebox/core';
import { DEFERRED_TICK_EVENT } from '@queuebox/deploy-contract';

// A tick whose drain leaves rows scheduled for later books one one-shot EventBridge Scheduler call of itself at
// the earliest due time, so that the periodic tick can run rarely and a pausable Aurora can pause (infra/README.md
// "Idle cost"). Infra creates the schedule group and the role (infra/wake-ups.ts) and passes their names in
// WAKE_SCHEDULE_GROUP / WAKE_SCHEDULER_ROLE_ARN.

/** The CreateSchedule input this module sends (a subset of `@aws-sdk/client-scheduler`'s). */
export interface ScheduleBooking {
  readonly Name: string;
  readonly GroupName: string;
  /** `at(yyyy-mm-ddThh:mm:ss)`, in UTC. */
  readonly ScheduleExpression: string;
  readonly ScheduleExpressionTimezone: 'UTC';
  readonly FlexibleTimeWindow: { readonly Mode: 'OFF' };
  readonly ActionAfterCompletion: 'DELETE';
  readonly Target: { readonly Arn: string; readonly RoleArn: string; readonly Input: string };
}

/** Creates schedules: the one thing deferred ticks need from the EventBridge Scheduler API. */
export interface ScheduleCreator {
  /** Creates the schedule; rejects with an error named `ConflictException` when the name exists in the group. */
  createSchedule(input: ScheduleBooking): Promise<void>;
}

/**
 * The creator over `@aws-sdk/client-scheduler`, loaded and built on the first booking (the Lambda runtime provides
 * the SDK; a container that never books never loads it). Default: the region and credentials of the function.
 */
export function createSchedulerClient(config: Record<string, unknown> = {}): ScheduleCreator {
  let ready: Promise<(input: ScheduleBooking) => Promise<unknown>> | undefined;
  return {
    async createSchedule(input) {
      ready ??= import('@aws-sdk/client-scheduler').then(({ CreateScheduleCommand, SchedulerClient }) => {
        const client = new SchedulerClient({ ...AWS_CLIENT_DEFAULTS, ...config });
        return (booking: ScheduleBooking) => client.send(new CreateScheduleCommand(booking));
      });
      const send = await ready;
      await send(input);
    },
  };
}

/** Scheduler's granularity: a one-shot schedule fires at a whole minute. */
const MINUTE_MS = 60_000;

/** `t` rounded up to the next whole minute (a whole minute stays). */
export function ceilToMinute(t: number): number {
  return Math.ceil(t / MINUTE_MS) * MINUTE_MS;
}

/**
 * Whether the periodic tick of rate `rateMinutes` certainly fires at minute `at` (a whole minute, UTC). infra
 * (infra/schedules-plan.ts `scheduleExpression`) puts rates that divide an hour, or a day in whole hours, on the clock; other
 * rates run at a phase nobody knows, so they never count as certain.
 */
export function periodicTickAt(at: number, rateMinutes: number | undefined): boolean {
  if (rateMinutes === undefined || !Number.isInteger(rateMinutes) || rateMinutes < 1) return false;
  if (rateMinutes === 1) return true;
  const onClock =
    (rateMinutes < 60 && 60 % rateMinutes === 0) ||
    rateMinutes === 60 ||
    (rateMinutes % 60 === 0 && 1440 % rateMinutes === 0);
  if (!onClock) return false;
  const minuteOfDay = Math.floor(at / MINUTE_MS) % 1440;
  return minuteOfDay % rateMinutes === 0;
}

/** `at(yyyy-mm-ddThh:mm:ss)` of a UTC instant. */
export function atExpression(at: number): string {
  return `at(${new Date(at).toISOString().slice(0, 19)})`;
}

/**
 * The schedule's name (at most 64 of `[0-9A-Za-z_.-]`): a readable part of the function name, a hash of the whole
 * name (names cut short stay apart) and the minute, so two bookings of one function for one minute share a name.
 */
export function scheduleName(functionName: string, at: number): string {
  const readable = functionName.replace(/[^0-9A-Za-z_.-]/g, '-').slice(0, 32);
  const hash = createHash('sha256').update(functionName).digest('hex').slice(0, 8);
  const minute = new Date(at).toISOString().slice(0, 16).replace(/[-:]/g, '');
  return `${readable}-${hash}-${minute}`;
}

/** What one {@link DeferredTick.book} call did. */
export type BookingOutcome =
  | { readonly booked: false; readonly reason: 'nothing-later' | 'not-configured' | 'periodic-tick' }
  | { readonly booked: true; readonly at: string; readonly name: string; readonly existed: boolean }
  | { readonly booked: false; readonly reason: 'failed'; readonly at: string; readonly error: unknown };

/** Options of {@link createDeferredTick}. */
export interface DeferredTickOptions {
  readonly scheduler: ScheduleCreator;
  /** `WAKE_SCHEDULE_GROUP`; unset: no booking (a deployment without deferred ticks). */
  readonly group: string | undefined;
  /** `WAKE_SCHEDULER_ROLE_ARN`; unset: no booking. */
  readonly roleArn: string | undefined;
  readonly clock: Clock;
}

/** Books deferred ticks of one function; remembers what this container booked. */
export interface DeferredTick {
  /**
   * Books one invocation of `functionArn` at `due` rounded up to the minute, unless `due` is null, the periodic
   * tick (every `rateMinutes`) fires at that minute anyway, or this container booked that minute already. A
   * schedule of that name booked elsewhere (ConflictException) counts as booked. Never throws: a failed booking
   * costs latency only, the periodic tick finds the rows.
   */
  book(args: {
    readonly due: Date | null;
    readonly functionArn: string;
    readonly functionName: string;
    readonly rateMinutes?: number;
  }): Promise<BookingOutcome>;
}

/** Creates the booking of deferred ticks. */
export function createDeferredTick(options: DeferredTickOptions): DeferredTick {
  const { scheduler, group, roleArn, clock } = options;
  let lastBooked: string | undefined;
  return {
    async book({ due, functionArn, functionName, rateMinutes }) {
      if (due === null) return { booked: false, reason: 'nothing-later' };
      if (!group || !roleArn) return { booked: false, reason: 'not-configured' };
      // A schedule in the past or this very minute would fire late or not at all: the next minute at the earliest.
      const atMs = Math.max(ceilToMinute(due.getTime()), ceilToMinute(clock.now() + 1));
      if (periodicTickAt(atMs, rateMinutes)) return { booked: false, reason: 'periodic-tick' };
      const name = scheduleName(functionName, atMs);
      const at = new Date(atMs).toISOString();
      if (lastBooked === name) return { booked: true, at, name, existed: true };
      try {
        await scheduler.createSchedule({
          Name: name,
          GroupName: group,
          ScheduleExpression: atExpression(atMs),
          ScheduleExpressionTimezone: 'UTC',
          FlexibleTimeWindow: { Mode: 'OFF' },
          ActionAfterCompletion: 'DELETE',
          Target: { Arn: functionArn, RoleArn: roleArn, Input: JSON.stringify(DEFERRED_TICK_EVENT) },
        });
        lastBooked = name;
        return { booked: true, at, name, existed: false };
      } catch (error) {
        if (error instanceof Error && error.name === 'ConflictException') {
          lastBooked = name;
          return { booked: true, at, name, existed: true };
        }
        return { booked: false, reason: 'failed', at, error };
      }
    },
  };
}
