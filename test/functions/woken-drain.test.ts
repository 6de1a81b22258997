import { describe, expect, it } from 'vitest';
import { addReports, drainCoveringWakeUps } from '../../functions/lambda-shell/woken-drain.ts';

type Report = { stoppedFor: string; forwarded: number; ids: string[]; reclaimed: { returned: number } };

/** A drain that answers the given reports in turn and records when (the real clock) it was called. */
function aDrain(...reports: Report[]) {
  const calls: number[] = [];
  return {
    calls,
    drain: async () => {
      calls.push(Date.now());
      const next = reports.shift();
      if (next === undefined) throw new Error('drained more often than expected');
      return next;
    },
  };
}

const empty = (forwarded: number, id: string): Report => ({
  stoppedFor: 'empty',
  forwarded,
  ids: [id],
  reclaimed: { returned: 1 },
});

describe('drainCoveringWakeUps', () => {
  const clock = { now: () => Date.now() };

  it('drains once more at the end of the hold when a wake-up started it and the drain ended empty early', async () => {
    const { calls, drain } = aDrain(empty(1, 'a'), empty(2, 'b'));
    const startedAt = Date.now();
    const report = await drainCoveringWakeUps({
      event: { trigger: 'wakeup' },
      startedAt,
      clock,
      deadline: startedAt + 30_000,
      drain,
      holdMs: 300,
    });
    expect(calls).toHaveLength(2);
    expect((calls[1] ?? 0) - startedAt).toBeGreaterThanOrEqual(295);
    expect(report).toEqual({
      stoppedFor: 'empty',
      forwarded: 3,
      ids: ['a', 'b'],
      reclaimed: { returned: 2 },
    });
  });

  it.each([
    ['a scheduled tick', { trigger: 'schedule' }, 'empty'],
    ['a deferred tick', { trigger: 'deferred' }, 'empty'],
    ['an EventBridge rule event', { 'detail-type': 'Scheduled Event' }, 'empty'],
    ['a drain its deadline stopped', { trigger: 'wakeup' }, 'time'],
    ['an aborted drain', { trigger: 'wakeup' }, 'aborted'],
  ])('drains once for %s', async (_name, event, stoppedFor) => {
    const { calls, drain } = aDrain({ ...empty(1, 'a'), stoppedFor });
    const startedAt = Date.now();
    await drainCoveringWakeUps({
      event: event as never,
      startedAt,
      clock,
      deadline: startedAt + 30_000,
      drain,
      holdMs: 300,
    });
    expect(calls).toHaveLength(1);
  });

  it('does not hold past the drain deadline; a first drain that ended after the hold is followed by another at once', async () => {
    const short = aDrain(empty(1, 'a'));
    const startedAt = Date.now();
    await drainCoveringWakeUps({
      event: { trigger: 'wakeup' },
      startedAt,
      clock,
      deadline: startedAt + 200,
      drain: short.drain,
      holdMs: 300,
    });
    // The first drain's last claim may have started before the hold ended (it waited for slow deliveries).
    const late = aDrain(empty(1, 'a'), empty(1, 'b'));
    const before = Date.now();
    await drainCoveringWakeUps({
      event: { trigger: 'wakeup' },
      startedAt: before - 1_000,
      clock,
      deadline: before + 30_000,
      drain: late.drain,
      holdMs: 300,
    });
    expect(short.calls).toHaveLength(1);
    expect(late.calls).toHaveLength(2);
    expect((late.calls[1] ?? 0) - before).toBeLessThan(250);
  });

  it('tells afterDrain each report as its drain ends', async () => {
    const { drain } = aDrain(empty(1, 'a'), empty(2, 'b'));
    const told: number[] = [];
    const startedAt = Date.now();
    await drainCoveringWakeUps({
      event: { trigger: 'wakeup' },
      startedAt,
      clock,
      deadline: startedAt + 30_000,
      drain,
      afterDrain: async (report) => {
        told.push(Date.now() - startedAt, report.forwarded);
      },
      holdMs: 300,
    });
    // The first report before the hold, the second after it.
    expect(told[1]).toBe(1);
    expect(told[0]).toBeLessThan(250);
    expect(told[3]).toBe(2);
    expect(told[2]).toBeGreaterThanOrEqual(295);
  });
});

describe('addReports', () => {
  it('adds numbers, joins lists, adds nested counts and keeps the later of anything else', () => {
    expect(
      addReports(
        { n: 1, list: [1], nested: { a: 1, b: 'x' }, why: 'empty' },
        { n: 2, list: [2, 3], nested: { a: 4, b: 'y' }, why: 'time' },
      ),
    ).toEqual({ n: 3, list: [1, 2, 3], nested: { a: 5, b: 'y' }, why: 'time' });
  });

  it("keeps the longer of two drains' key-lock waits (the relay's keyWaitMs), not their sum", () => {
    expect(addReports({ forwarded: 1, keyWaitMs: 1_200 }, { forwarded: 2, keyWaitMs: 900 })).toEqual({
      forwarded: 3,
      keyWaitMs: 1_200,
    });
    expect(addReports({ forwarded: 1 }, { forwarded: 2, keyWaitMs: 900 })).toEqual({
      forwarded: 3,
      keyWaitMs: 900,
    });
  });
});
