/**
 * The inbox group commit's deadlines (`maxWaitMs`) run on the monotonic clock: a step of the wall clock (an NTP
 * correction, a resumed VM) neither answers waiting stores at once nor lets them wait past the bound. Only `Date` is
 * faked and stepped; `performance.now` and the timers run on. The statements go to a fake executor that holds them.
 */
import { StoreUnavailableError } from '@queuebox/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SqlExecutor } from '../src/executor.ts';
import { createInboxBatcher } from '../src/inbox-batch.ts';
import { anInboxMessage } from './messages.ts';

/** An executor whose statements wait until `release`, then answer every row of the batch stored. */
function heldExecutor() {
  const waiting: (() => void)[] = [];
  let released = false;
  const executor: SqlExecutor = {
    async query<R>(_text: string, values?: readonly unknown[]) {
      if (!released) await new Promise<void>((resolve) => waiting.push(resolve));
      const [sources, keys] = (values ?? []) as [string[], string[]];
      const rows = sources.map((source, at) => ({
        id: `${at + 1}`,
        source,
        idempotency_key: keys[at],
        stored: true,
      }));
      return { rows: rows as R[], rowCount: rows.length };
    },
    transaction: (fn) => fn(executor),
    close: async () => undefined,
  };
  return {
    executor,
    statements: () => waiting.length,
    release: () => {
      released = true;
      for (const resolve of waiting.splice(0)) resolve();
    },
  };
}

const item = () => ({
  message: anInboxMessage({ source: 'clock' }),
  state: 'pending' as const,
  lastError: null,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The wall clock faked (only `Date`), and a batcher of `maxWaitMs` on a held executor. */
function heldBatcher(maxWaitMs: number) {
  vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-07T05:00:00Z') });
  const held = heldExecutor();
  const store = createInboxBatcher({
    executor: held.executor,
    schema: 'clock_step',
    storeOne: () => Promise.reject(new Error('not expected')),
    maxWaitMs,
  });
  return { held, store };
}

describe('inbox group commit deadlines with the wall clock stepped', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('does not answer waiting stores 503 when the wall clock steps forward 90 s', async () => {
    // Prepare: maxWaitMs 2 s (a sweep every 500 ms); one store in a held statement, one queued behind it
    const { held, store } = heldBatcher(2000);
    const answers: unknown[] = [];
    const inStatement = store(item()).then(
      (result) => answers.push(result.status),
      (error: unknown) => answers.push(error),
    );
    while (held.statements() === 0) await sleep(5);
    const queued = store(item()).then(
      (result) => answers.push(result.status),
      (error: unknown) => answers.push(error),
    );

    // Act: the wall clock steps forward 90 s; a sweep later the statement answers
    vi.setSystemTime(Date.now() + 90_000);
    await sleep(700);
    const before = [...answers];
    held.release();
    await Promise.all([inStatement, queued]);

    // Assess: nothing was answered 503 during the step (before, both were, at the first sweep); both stored
    expect(before).toEqual([]);
    expect(answers).toEqual(['stored', 'stored']);
  });

  it('answers a waiting store within maxWaitMs when the wall clock steps back 90 s', async () => {
    // Prepare: maxWaitMs 400 ms (a sweep every 100 ms); one store in a statement that never answers
    const { held, store } = heldBatcher(400);
    const started = performance.now();
    const call = store(item()).catch((error: unknown) => error);
    while (held.statements() === 0) await sleep(5);

    // Act: the wall clock steps back 90 s
    vi.setSystemTime(Date.now() - 90_000);
    const answer = await Promise.race([call, sleep(3_000).then(() => 'still waiting')]);
    const waitedMs = performance.now() - started;
    held.release();

    // Assess: 503 about maxWaitMs after the call (before, it waited 90 s more)
    expect(answer).toBeInstanceOf(StoreUnavailableError);
    expect(waitedMs).toBeLessThan(2_000);
  });
});
