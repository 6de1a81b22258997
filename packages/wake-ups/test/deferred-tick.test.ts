/** The pure rules of deferred ticks: the booked minute, when the periodic tick stands in, schedule names. */
import { describe, expect, it } from 'vitest';
import {
  atExpression,
  ceilToMinute,
  createDeferredTick,
  periodicTickAt,
  scheduleName,
} from '../src/deferred-tick.ts';

const at = (iso: string) => Date.parse(iso);

describe('deferred tick rules', () => {
  it('rounds a due time up to the whole minute and keeps a whole minute', () => {
    expect(new Date(ceilToMinute(at('2026-11-30T07:42:00.001Z'))).toISOString()).toBe(
      '2026-11-30T07:43:00.000Z',
    );
    expect(new Date(ceilToMinute(at('2026-11-30T07:42:00.000Z'))).toISOString()).toBe(
      '2026-11-30T07:42:00.000Z',
    );
    expect(atExpression(at('2026-11-30T07:43:00.000Z'))).toBe('at(2026-11-30T07:43:00)');
  });

  it('counts on the periodic tick only when its rate is on the clock and fires in that minute', () => {
    expect(periodicTickAt(at('2026-11-30T07:43:00Z'), 1)).toBe(true);
    expect(periodicTickAt(at('2026-11-30T07:45:00Z'), 15)).toBe(true);
    expect(periodicTickAt(at('2026-11-30T07:43:00Z'), 15)).toBe(false);
    expect(periodicTickAt(at('2026-11-30T08:00:00Z'), 60)).toBe(true);
    expect(periodicTickAt(at('2026-11-30T08:00:00Z'), 120)).toBe(true);
    expect(periodicTickAt(at('2026-11-30T09:00:00Z'), 120)).toBe(false);
    expect(periodicTickAt(at('2026-11-30T00:00:00Z'), 1440)).toBe(true);
    // rate(7 minutes) runs at a phase the function cannot know.
    expect(periodicTickAt(at('2026-11-30T07:07:00Z'), 7)).toBe(false);
    expect(periodicTickAt(at('2026-11-30T07:07:00Z'), undefined)).toBe(false);
  });

  it('names a schedule by function and minute within Scheduler limits; long names stay apart', () => {
    const minute = at('2026-11-30T07:43:00Z');
    const long = 'queuebox-production-OutboxTickFunction-0123456789abcdef';

    const names = [
      scheduleName('queuebox-dev-OutboxTick', minute),
      scheduleName('queuebox-dev-OutboxTick', minute + 60_000),
      scheduleName(`${long}-a`, minute),
      scheduleName(`${long}-b`, minute),
    ];

    for (const name of names) expect(name).toMatch(/^[0-9A-Za-z_.-]{1,64}$/);
    expect(names[0]).toMatch(/^queuebox-dev-OutboxTick-[0-9a-f]{8}-20261130T0743$/);
    expect(new Set(names).size).toBe(4);
    expect(scheduleName('queuebox-dev-OutboxTick', minute)).toBe(names[0]);
  });

  it('books the next minute at the earliest when the due time has passed meanwhile', async () => {
    const calls: string[] = [];
    const tick = createDeferredTick({
      scheduler: { createSchedule: async (input) => void calls.push(input.ScheduleExpression) },
      group: 'g',
      roleArn: 'arn:aws:iam::123456789012:role/r',
      clock: { now: () => at('2026-11-30T07:42:30Z') },
    });

    const outcome = await tick.book({
      due: new Date('2026-11-30T07:40:10Z'),
      functionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:f',
      functionName: 'f',
      rateMinutes: 7,
    });

    expect(outcome).toMatchObject({ booked: true, at: '2026-11-30T07:43:00.000Z' });
    expect(calls).toEqual(['at(2026-11-30T07:43:00)']);
  });

  it('books the next minute, not the current one, when the clock is exactly on a minute and the due time passed', async () => {
    // Prepare
    const calls: string[] = [];
    const tick = createDeferredTick({
      scheduler: { createSchedule: async (input) => void calls.push(input.ScheduleExpression) },
      group: 'g',
      roleArn: 'arn:aws:iam::123456789012:role/r',
      clock: { now: () => at('2026-11-30T07:42:00Z') },
    });

    // Act
    const outcome = await tick.book({
      due: new Date('2026-11-30T07:41:55Z'),
      functionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:f',
      functionName: 'f',
    });

    // Assess
    expect(outcome).toMatchObject({ booked: true, at: '2026-11-30T07:43:00.000Z' });
    expect(calls).toEqual(['at(2026-11-30T07:43:00)']);
  });

  it('books nothing without a scheduler group or a role for the Scheduler to invoke with', async () => {
    // Prepare
    const calls: string[] = [];
    const tickWith = (group: string | undefined, roleArn: string | undefined) =>
      createDeferredTick({
        scheduler: { createSchedule: async (input) => void calls.push(input.ScheduleExpression) },
        group,
        roleArn,
        clock: { now: () => at('2026-11-30T07:42:30Z') },
      });
    const booking = {
      due: new Date('2026-11-30T07:50:00Z'),
      functionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:f',
      functionName: 'f',
    };

    // Act
    const noRole = await tickWith('g', undefined).book(booking);
    const noGroup = await tickWith(undefined, 'arn:aws:iam::123456789012:role/r').book(booking);

    // Assess
    expect(noRole).toEqual({ booked: false, reason: 'not-configured' });
    expect(noGroup).toEqual({ booked: false, reason: 'not-configured' });
    expect(calls).toEqual([]);
  });
});
