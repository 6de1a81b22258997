import { describe, expect, it } from 'vitest';
import { retryWhileUnavailable, StoreError, StoreUnavailableError } from '../src/index.ts';

/** A clock that the pauses move forward, and the pauses taken. */
function time() {
  let now = 0;
  const pauses: number[] = [];
  return {
    pauses,
    now: () => now,
    sleep: async (ms: number) => {
      pauses.push(ms);
      now += ms;
    },
  };
}

/** A write that fails with each of `errors` in turn, then answers 'written'; counts its calls. */
function failing(...errors: Error[]) {
  let calls = 0;
  return {
    calls: () => calls,
    write: async () => {
      const error = errors[calls++];
      if (error) throw error;
      return 'written';
    },
  };
}

const down = () => new StoreUnavailableError('the database system is starting up');

describe('retryWhileUnavailable and conflicts', () => {
  it('tries a write the database ended as a deadlock victim again (isTransientConflict), a plain store error not', async () => {
    const clock = time();
    const victim = () => new StoreError('deadlock detected', { context: { transientConflict: true } });
    const write = failing(victim(), new Error('wrapped', { cause: victim() }));
    const other = failing(new StoreError('syntax error'));

    await expect(retryWhileUnavailable(write.write, { ...clock, until: 60_000 })).resolves.toBe('written');
    await expect(retryWhileUnavailable(other.write, { ...clock, until: 60_000 })).rejects.toThrow(
      'syntax error',
    );
    expect(write.calls()).toBe(3);
    expect(other.calls()).toBe(1);
  });
});

describe('retryWhileUnavailable', () => {
  it('tries again while the database is unavailable, pausing 0.1 s doubling to 2 s', async () => {
    const clock = time();
    const write = failing(down(), down(), down(), down(), down(), down());
    await expect(retryWhileUnavailable(write.write, { ...clock, until: 60_000 })).resolves.toBe('written');
    expect(clock.pauses).toEqual([100, 200, 400, 800, 1600, 2000]);
    expect(write.calls()).toBe(7);
  });

  it('throws any other error at once', async () => {
    const clock = time();
    const write = failing(new Error('syntax error'));
    await expect(retryWhileUnavailable(write.write, { ...clock, until: 60_000 })).rejects.toThrow(
      'syntax error',
    );
    expect(write.calls()).toBe(1);
  });

  it('starts no try at or after until, and none once stopped', async () => {
    const clock = time();
    const late = failing(down(), down(), down());
    await expect(retryWhileUnavailable(late.write, { ...clock, until: 300 })).rejects.toThrow(
      StoreUnavailableError,
    );
    expect(clock.pauses).toEqual([100]);
    let stop = false;
    const stopping = failing(down(), down(), down());
    const onUnavailable = () => {
      stop = true;
    };
    await expect(
      retryWhileUnavailable(stopping.write, { ...time(), until: 60_000, stopped: () => stop, onUnavailable }),
    ).rejects.toThrow(StoreUnavailableError);
    expect(stopping.calls()).toBe(2);
  });

  it('takes the failure of a first try made elsewhere, and reports each outage before its pause', async () => {
    const clock = time();
    const write = failing(down());
    const seen: number[] = [];
    const result = await retryWhileUnavailable(write.write, {
      ...clock,
      until: 60_000,
      failed: { error: down() },
      onUnavailable: (_error, failures) => seen.push(failures),
    });
    expect(result).toBe('written');
    expect(seen).toEqual([1, 2]);
    expect(write.calls()).toBe(2);
    await expect(
      retryWhileUnavailable(write.write, { ...time(), until: 60_000, failed: { error: new Error('bad') } }),
    ).rejects.toThrow('bad');
  });
});
