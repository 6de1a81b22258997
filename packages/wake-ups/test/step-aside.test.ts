import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createStepAside, type StepAside, type StepAsideOptions } from '../src/step-aside.ts';

describe('createStepAside', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  interface Probe {
    readonly stepAside: StepAside;
    readonly wanted: boolean[];
    readonly changes: (readonly number[] | [boolean, number] | [boolean, number, number])[];
    wakes: number;
    /** What `want(true)` answers. */
    held: boolean;
  }

  function aStepAside(options: Partial<StepAsideOptions> = {}): Probe {
    const probe = {
      wanted: [] as boolean[],
      changes: [] as Probe['changes'][number][],
      wakes: 0,
      held: true,
    };
    const stepAside = createStepAside({
      want: async (wanted) => {
        probe.wanted.push(wanted);
        return wanted && probe.held;
      },
      wake: () => {
        probe.wakes += 1;
      },
      onChange: (aside, perSecond, waitingShare) =>
        probe.changes.push(
          waitingShare === undefined ? [aside, perSecond] : [aside, perSecond, waitingShare],
        ),
      now: () => Date.now(),
      ...options,
    });
    return Object.assign(probe, { stepAside });
  }

  /** `count` notifications spread over one second, then the decision at its end. */
  async function notifiedOverASecond(probe: Probe, count: number) {
    for (let i = 0; i < count; i++) probe.stepAside.notified();
    await vi.advanceTimersByTimeAsync(1000);
  }

  it('keeps listening below 500 notifications a second, and steps aside at 500', async () => {
    const probe = aStepAside();
    await notifiedOverASecond(probe, 499);
    expect(probe.stepAside.aside).toBe(false);
    expect(probe.wanted).toEqual([]);

    await notifiedOverASecond(probe, 500);
    expect(probe.stepAside.aside).toBe(true);
    expect(probe.wanted).toEqual([false]);
    expect(probe.changes).toEqual([[true, 500, 0]]);
    probe.stepAside.close();
  });

  it('wakes the drain every 5 ms while aside, and stops when closed', async () => {
    const probe = aStepAside();
    await notifiedOverASecond(probe, 800);
    const before = probe.wakes;
    await vi.advanceTimersByTimeAsync(100);
    expect(probe.wakes - before).toBe(20);

    probe.stepAside.close();
    const closedAt = probe.wakes;
    await vi.advanceTimersByTimeAsync(1000);
    expect(probe.wakes).toBe(closedAt);
  });

  it('comes back only after 5 s aside and once the drain claims fewer than 250 rows a second', async () => {
    const probe = aStepAside();
    await notifiedOverASecond(probe, 1000);
    // Quiet at once, but not 5 s aside yet.
    await vi.advanceTimersByTimeAsync(3000);
    expect(probe.stepAside.aside).toBe(true);
    // Busy past 5 s: the drain claims 400 rows a second.
    for (let s = 0; s < 3; s++) {
      probe.stepAside.claimed(400);
      await vi.advanceTimersByTimeAsync(1000);
    }
    expect(probe.stepAside.aside).toBe(true);
    expect(probe.wanted).toEqual([false]);

    probe.stepAside.claimed(249);
    await vi.advanceTimersByTimeAsync(1000);
    expect(probe.stepAside.aside).toBe(false);
    expect(probe.wanted).toEqual([false, true]);
    expect(probe.changes).toEqual([
      [true, 1000, 0],
      [false, 249],
    ]);
    // No more fast wake-ups; one wake for the claim that follows the lock taken back.
    const back = probe.wakes;
    await vi.advanceTimersByTimeAsync(500);
    expect(probe.wakes).toBe(back);
    probe.stepAside.close();
  });

  it('comes back only once the lock is taken: until then it stays aside and keeps its fast wake-ups', async () => {
    // Poll wake-ups 100 ms apart, so that they can be told from the wake after the take.
    const probe = aStepAside({ minAsideMs: 0, pollMs: 100 });
    probe.held = false;
    await notifiedOverASecond(probe, 600);
    expect(probe.stepAside.aside).toBe(true);

    // The take fails (open transactions, another listener that sends nothing): still aside, still woken, and the
    // capture told to let the lock be (it must not take it by itself while the load may come back).
    let before = probe.wakes;
    await vi.advanceTimersByTimeAsync(1000);
    expect(probe.stepAside.aside).toBe(true);
    expect(probe.wanted).toEqual([false, true, false]);
    expect(probe.wakes - before).toBe(10);
    expect(probe.changes).toHaveLength(1);

    // The next take succeeds: back, one wake for the claim that follows, no more fast wake-ups.
    probe.held = true;
    await vi.advanceTimersByTimeAsync(999);
    before = probe.wakes;
    await vi.advanceTimersByTimeAsync(1);
    expect(probe.stepAside.aside).toBe(false);
    expect(probe.wanted).toEqual([false, true, false, true]);
    // The poll's wake-up at that millisecond (ordered after the check's) and the take's.
    expect(probe.wakes - before).toBeLessThanOrEqual(2);
    expect(probe.wakes - before).toBeGreaterThanOrEqual(1);
    const back = probe.wakes;
    await vi.advanceTimersByTimeAsync(500);
    expect(probe.wakes).toBe(back);
    probe.stepAside.close();
  });

  it('comes back without the lock when notifications arrive while aside (another session holds it)', async () => {
    const probe = aStepAside({ minAsideMs: 0 });
    probe.held = false;
    await notifiedOverASecond(probe, 600);
    // Another runtime's listener (or one of an older version) holds the lock: its notifications arrive here too.
    await notifiedOverASecond(probe, 3);
    expect(probe.stepAside.aside).toBe(false);
    expect(probe.wanted).toEqual([false, true]);
    probe.stepAside.close();
  });

  it("decides on the application's insert rate when the capture reads it, not on the rows a slow destination takes", async () => {
    let inserted = 0;
    const probe = aStepAside({ minAsideMs: 0, outboxInserts: async () => inserted });
    await notifiedOverASecond(probe, 600);
    expect(probe.stepAside.aside).toBe(true);
    // 600 rows a second keep coming; the destination takes 100 of them.
    for (let s = 0; s < 5; s++) {
      inserted += 600;
      probe.stepAside.claimed(100);
      await vi.advanceTimersByTimeAsync(1000);
    }
    expect(probe.stepAside.aside).toBe(true);
    // The application slows down to 100 a second: back once the rate over the last readings (about 3 s) fell.
    for (let s = 0; s < 4; s++) {
      inserted += 100;
      probe.stepAside.claimed(100);
      await vi.advanceTimersByTimeAsync(1000);
    }
    expect(probe.stepAside.aside).toBe(false);
    probe.stepAside.close();
  });

  it('steps aside below 500 a second when commits wait in the notification line in half the samples or more', async () => {
    // A server whose commits are slow: 100 notifications a second is all the line lets through.
    let waiting = 0;
    let sampled = 0;
    const probe = aStepAside({
      waitingCommits: async () => {
        sampled += 1;
        return waiting;
      },
    });
    // Notifications arrive all through each second (the samples run only after one arrived).
    const busySecond = async () => {
      for (let ms = 0; ms < 1000; ms += 10) {
        probe.stepAside.notified();
        await vi.advanceTimersByTimeAsync(10);
      }
    };
    await busySecond();
    expect(sampled).toBeGreaterThanOrEqual(9);
    expect(probe.stepAside.aside).toBe(false);

    waiting = 3;
    await busySecond();
    expect(probe.stepAside.aside).toBe(true);
    expect(probe.changes).toHaveLength(1);
    const [to, perSecond, share] = probe.changes[0] as [boolean, number, number];
    expect([to, perSecond]).toEqual([true, 100]);
    expect(share).toBeGreaterThanOrEqual(0.5);

    // Aside: no more samples. Back once claims fall under half the 100 a second that made it step aside (50), not 250.
    const samplesAside = sampled;
    for (let s = 0; s < 5; s++) {
      probe.stepAside.claimed(100);
      await vi.advanceTimersByTimeAsync(1000);
    }
    expect(sampled).toBe(samplesAside);
    expect(probe.stepAside.aside).toBe(true);
    probe.stepAside.claimed(49);
    await vi.advanceTimersByTimeAsync(1000);
    expect(probe.stepAside.aside).toBe(false);
    probe.stepAside.close();
  });

  it('ignores waiting commits under 50 notifications a second, and samples nothing while none arrive', async () => {
    let sampled = 0;
    const probe = aStepAside({
      waitingCommits: async () => {
        sampled += 1;
        return 5;
      },
    });
    await vi.advanceTimersByTimeAsync(3000);
    expect(sampled).toBe(0);
    for (let s = 0; s < 3; s++) {
      for (let ms = 0; ms < 1000; ms += 100) {
        for (let i = 0; i < 4; i++) probe.stepAside.notified();
        await vi.advanceTimersByTimeAsync(100);
      }
    }
    expect(sampled).toBeGreaterThan(20);
    expect(probe.stepAside.aside).toBe(false);
    probe.stepAside.close();
  });

  it('never steps aside for rows that arrive in large statements (few notifications, many rows)', async () => {
    const probe = aStepAside();
    for (let s = 0; s < 5; s++) {
      probe.stepAside.claimed(50_000);
      await notifiedOverASecond(probe, 100);
    }
    expect(probe.stepAside.aside).toBe(false);
    expect(probe.wanted).toEqual([]);
    probe.stepAside.close();
  });

  it('reports a failed give-back and stays aside (the capture reconnects without the lock)', async () => {
    const errors: unknown[] = [];
    const probe = aStepAside({
      want: async () => {
        throw new Error('connection lost');
      },
      onError: (error) => errors.push(error),
    });
    await notifiedOverASecond(probe, 700);
    expect(probe.stepAside.aside).toBe(true);
    expect(errors).toHaveLength(1);
    probe.stepAside.close();
  });
});
