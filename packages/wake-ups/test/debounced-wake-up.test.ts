import { describe, expect, it } from 'vitest';
import { createWakeUp } from '../src/debounced-wake-up.ts';

function aClock(start = 1_000_000) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

describe('createWakeUp', () => {
  it('sends the first request at once and drops the others within the interval', async () => {
    const clock = aClock();
    let sent = 0;
    const wakeUp = createWakeUp({ send: async () => void sent++, clock, minIntervalMs: 1000 });

    const answers = [await wakeUp.request(), await wakeUp.request()];
    clock.advance(999);
    answers.push(await wakeUp.request());

    expect(answers).toEqual([true, false, false]);
    expect(sent).toBe(1);
  });

  it('sends again once the interval has passed (default 1000 ms)', async () => {
    const clock = aClock();
    let sent = 0;
    const wakeUp = createWakeUp({ send: async () => void sent++, clock });

    await wakeUp.request();
    clock.advance(1000);
    const again = await wakeUp.request();

    expect(again).toBe(true);
    expect(sent).toBe(2);
  });

  it('drops a request while a send is still running', async () => {
    let finish = () => {};
    let sent = 0;
    const wakeUp = createWakeUp({
      send: () =>
        new Promise<void>((resolve) => {
          sent++;
          finish = resolve;
        }),
      clock: aClock(),
    });

    const first = wakeUp.request();
    const second = await wakeUp.request();
    finish();

    expect(second).toBe(false);
    expect(await first).toBe(true);
    expect(sent).toBe(1);
  });

  it('never rejects: a failed send is reported, does not count, and the next request tries again', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const wakeUp = createWakeUp({
      send: async () => {
        calls++;
        if (calls === 1) throw new Error('throttled');
      },
      clock: aClock(),
      onError: (error) => errors.push(error),
    });

    const failed = await wakeUp.request();
    const retried = await wakeUp.request();

    expect([failed, retried]).toEqual([false, true]);
    expect(errors).toHaveLength(1);
    expect(calls).toBe(2);
  });
});
