/**
 * The drain's deadline and the destination's timeout: a drain long enough for the destination's timeout claims
 * only while a request could run to it and starts none that could not (released untried, no attempt), also after a
 * wait for a connection; a request the deadline does cut (a drain too short for the timeout) counts as an attempt,
 * so a destination that never answers within the drain ends dead instead of being sent the row for ever.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createTransformRegistry } from '../src/transforms.ts';
import {
  aPoller,
  defaultOptions,
  destinationsFor,
  insert,
  receiver,
  rowOf,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

/** The receiver answers 204 after `ms`. */
function answerAfter(ms: number): void {
  receiver.handle(async (_request, response) => {
    await sleep(ms);
    response.writeHead(204).end();
  });
}

describe('createOutboxPoller at its drain deadline', () => {
  it('counts an attempt for a request its deadline cut in a drain too short for its timeout, so a destination that never answers in time ends dead', async () => {
    // Prepare: the destination answers in 1.5 s, within its 5 s timeout, but the drain (1.4 s with the harness's
    // 0.2 s settle reserve) must settle after 1.2 s: too short for the timeout, it starts the request anyway (nothing
    // better can happen in it), and the cut is an attempt, or such a row would be sent again for ever.
    answerAfter(1500);
    const [row] = (await insert({ maxAttempts: 1 })) as [RowId];
    const poller = aPoller({ destinations: destinationsFor({ timeoutMs: 5000 }) });

    // Act
    const report = await poller.drain({ deadline: Date.now() + 1400 });

    // Assess
    expect(receiver.requests).toHaveLength(1);
    expect(report).toMatchObject({ claimed: 1, sent: 0, dead: 1, released: 0 });
    expect(await rowOf(row)).toMatchObject({ state: 'Dead', attempt: 1 });
  });

  it('does not start a request its timeout would carry past the deadline, in a drain long enough for one', async () => {
    // Prepare: timeout 1 s, settle reserve 0.2 s, drain 2 s. The row is claimed at once, but its destination's
    // transform takes 0.9 s: the request would start with 0.9 s left before the abort, less than its timeout.
    answerAfter(100);
    const [row] = (await insert({})) as [RowId];
    const transforms = createTransformRegistry({
      slow: async (input) => {
        await sleep(900);
        return { payload: input.payload, headers: input.headers };
      },
    });
    const poller = aPoller({
      destinations: destinationsFor({ timeoutMs: 1000, transform: { function: 'slow' } }),
      transforms,
      options: { ...defaultOptions, transformTimeoutMs: 1500 },
    });

    // Act
    const report = await poller.drain({ deadline: Date.now() + 2000 });

    // Assess
    expect(receiver.requests).toHaveLength(0);
    expect(report).toMatchObject({ claimed: 1, sent: 0, released: 1, retried: 0 });
    expect(await rowOf(row)).toMatchObject({ state: 'Pending', attempt: 0 });
  });

  it('does not start a request that waited for a connection past the last moment its timeout fitted', async () => {
    // Prepare: one connection, timeout 1 s, reserve 0.2 s, drain 2 s. Two unkeyed rows are claimed together; the
    // first holds the connection for 0.95 s, so the second would start at 0.95 s and be cut at 1.8 s.
    answerAfter(950);
    const [first, second] = (await insert({}, {})) as [RowId, RowId];
    const poller = aPoller({ destinations: destinationsFor({ timeoutMs: 1000, maxConcurrency: 1 }) });

    // Act
    const report = await poller.drain({ deadline: Date.now() + 2000 });

    // Assess: one request only; the row that never went out is pending with no attempt counted.
    expect(receiver.requests).toHaveLength(1);
    expect(report).toMatchObject({ claimed: 2, sent: 1, released: 1, retried: 0 });
    const rows = [await rowOf(first), await rowOf(second)];
    expect(rows.map((r) => r.state).sort()).toEqual(['Pending', 'Sent']);
    expect(rows.find((r) => r.state === 'Pending')).toMatchObject({ attempt: 0, claimToken: null });
  });

  it('claims no more once less than the longest timeout and its settle remain, in a drain long enough for it', async () => {
    // Prepare: timeout 1 s, reserve 0.2 s, drain 1.5 s: claims only while 1.2 s remain, the first 0.3 s. Row a is
    // claimed at once and answered in 0.8 s; row b arrives at 0.5 s, with a still in flight, and wakes the drain.
    answerAfter(800);
    const [a] = (await insert({ key: 'a' })) as [RowId];
    const poller = aPoller({ destinations: destinationsFor({ timeoutMs: 1000 }) });
    const drained = poller.drain({ deadline: Date.now() + 1500 });
    await sleep(500);
    const [b] = (await insert({ key: 'b' })) as [RowId];
    poller.wake?.();

    // Act
    const report = await drained;

    // Assess: b is left for the next drain, not claimed only to be released untried.
    expect(report).toMatchObject({ claimed: 1, sent: 1, released: 0, stoppedFor: 'time' });
    expect(await rowOf(a)).toMatchObject({ state: 'Sent' });
    expect(await rowOf(b)).toMatchObject({ state: 'Pending', attempt: 0, claimToken: null });
  });

  it('ends a batch with its lease: a row whose timeout no longer fits before the lease ends is released untried', async () => {
    // Prepare: one connection, timeout 1 s, lease 2 s, reserve 0.2 s, a drain of 10 s. Four unkeyed rows are claimed
    // together and each answer takes 0.6 s, so the third would start at 1.2 s and could run to 2.2 s, past its lease:
    // leases are never renewed, and another replica could claim the row again and deliver it while it is in flight.
    answerAfter(600);
    const ids = (await insert({}, {}, {}, {})) as RowId[];
    const poller = aPoller({
      destinations: destinationsFor({ timeoutMs: 1000, maxConcurrency: 1 }),
      options: { ...defaultOptions, claimTimeoutMs: 2000 },
    });

    // Act: drains until every row is sent (a row that waited past the 1 s connection wait is due again after a
    // pause of that length, so the next drain may find nothing yet)
    const first = await poller.drain({ deadline: Date.now() + 10_000 });
    let sent = first.sent;
    for (let drains = 1; sent < 4 && drains < 8; drains++) {
      await new Promise((resolve) => setTimeout(resolve, 400));
      sent += (await poller.drain({ deadline: Date.now() + 10_000 })).sent;
    }

    // Assess: the first batch sent what fitted within its lease and released the rest untried; later drains
    // claimed those under new leases; every row was requested once and is sent.
    expect(first.released).toBeGreaterThanOrEqual(1);
    expect(sent).toBe(4);
    expect(receiver.requests).toHaveLength(4);
    for (const id of ids) expect(await rowOf(id)).toMatchObject({ state: 'Sent', attempt: 0 });
  });
});
