/**
 * Stragglers (`stragglerQuietMs`): a slow destination must not hold the deliveries of the others. Each batch holds
 * rows for `slow`, a receiver that keeps every request open until the test opens its gate, and rows for `hooks`,
 * the harness's receiver, answering at once. Before stragglers, a batch counted against `batchesInFlight` until its
 * slowest row was answered, so two batches with a slow row each stopped every claim: one hanging webhook endpoint
 * held all the others' deliveries for its whole timeout.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { RowId } from '@queuebox/core';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DestinationOptions, RouteOptions } from '../src/options.ts';
import { startOutboxLoop } from '../src/outbox-loop.ts';
import type { OutboxPollerOptions } from '../src/poller.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';
import {
  aPoller,
  defaultOptions,
  insert,
  receiver,
  rowOf,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

let slow: HttpReceiver;
const stops: { stop: AbortController; done: Promise<void> }[] = [];
/** Opens the slow receiver's gate: every request held so far, and every later one, is answered 204. */
let openGate: () => void = () => {};

beforeAll(async () => {
  slow = await startHttpReceiver();
});

afterEach(async () => {
  openGate();
  for (const { stop, done } of stops.splice(0)) {
    stop.abort();
    await done;
  }
  slow.reset();
});

afterAll(async () => {
  await slow?.close();
});

const routes: RouteOptions[] = [
  { match: 'slow.#', destination: 'slow' },
  { match: 'orders.#', destination: 'hooks' },
];

/**
 * `slow` allows 100 requests at once by default, so that only the poller's own limits hold its rows back; the
 * connection-wait case gives it 2.
 */
const destinations = (slowConcurrency = 100): Record<string, DestinationOptions> => ({
  slow: { type: 'http', url: slow.url, timeoutMs: 10_000, maxConcurrency: slowConcurrency },
  hooks: { type: 'http', url: receiver.url, timeoutMs: 10_000 },
});

/** The slow receiver holds every request until `openGate()`; answers how many it holds now. */
function gateSlowReceiver(): { readonly held: () => number } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let held = 0;
  openGate = release;
  slow.handle(async (_request, response) => {
    held++;
    await gate;
    held--;
    response.writeHead(204).end();
  });
  return { held: () => held };
}

async function until(what: string, done: () => boolean, withinMs = 15_000): Promise<void> {
  const giveUpAt = Date.now() + withinMs;
  while (!done()) {
    if (Date.now() > giveUpAt) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Batches of 10 (the harness's), two in flight: every tenth row is for the slow destination. */
function startLoop(options: Partial<OutboxPollerOptions> = {}, slowConcurrency?: number) {
  const poller = aPoller({
    destinations: destinations(slowConcurrency),
    routes,
    options: { ...defaultOptions, batchesInFlight: 2, ...options },
  });
  const stop = new AbortController();
  const loop = startOutboxLoop(poller, { pollIntervalMs: 50, signal: stop.signal });
  stops.push({ stop, done: loop.done });
  return loop;
}

const mixed = (rows: number, slowEvery: number) =>
  Array.from({ length: rows }, (_, i) =>
    i % slowEvery === 0 ? { topic: 'slow.job', payload: { i } } : { payload: { i } },
  );

describe('stragglers: a slow destination beside fast ones', () => {
  it('delivers and settles every fast row while the slow rows of their batches are still held', async () => {
    // Prepare: 200 rows, one slow in each batch of 10 — 20 slow rows, the most that may straggle (10 × 2).
    const { held } = gateSlowReceiver();
    const ids = await insert(...mixed(200, 10));
    const fastIds = ids.filter((_, i) => i % 10 !== 0);
    const slowIds = ids.filter((_, i) => i % 10 === 0);

    // Act
    const loop = startLoop();
    loop.wake();
    await until('every fast row delivered', () => receiver.requests.length === fastIds.length);

    // Assess: the slow requests all reach the receiver and stay held, and the fast rows are settled meanwhile.
    await until('every slow request held', () => held() === slowIds.length);
    await untilSent(fastIds);
    expect(held()).toBe(slowIds.length);
    for (const id of slowIds) await expect(rowOf(id)).resolves.toMatchObject({ state: 'Processing' });
    openGate();
    await until('every slow row answered', () => held() === 0);
    await untilSent(slowIds);
    expect(slow.requests).toHaveLength(slowIds.length);
  });

  it('lets at most batchSize × batchesInFlight rows straggle; past that a batch waits for its slow rows', async () => {
    // Prepare: every other row slow, 300 rows; 5 stragglers per batch.
    const { held } = gateSlowReceiver();
    const ids = await insert(...mixed(300, 2));

    // Act: let the poller go as far as its limits allow.
    const loop = startLoop();
    loop.wake();
    await until('the slow requests to stop growing', () => held() >= 20);
    await sleep(500);
    const heldWhileBlocked = held();
    const deliveredWhileBlocked = receiver.requests.length;

    // Assess: 20 stragglers at most, plus the slow rows of the two batches that wait for theirs; claiming stopped.
    expect(heldWhileBlocked).toBeLessThanOrEqual(20 + 2 * 5);
    expect(deliveredWhileBlocked).toBeLessThan(150);
    openGate();
    await untilSent(ids);
  });

  it('gives back untried the rows waiting for a connection of a destination that hangs, so they hold no batch', async () => {
    // Prepare: the audit's case. Every other row is for `slow`, which hangs with its 2 connections busy; the rows
    // queued for them used to wait for a connection until the drain's deadline, filled the stragglers' cap and
    // stopped every claim: the healthy destination's rows waited for minutes.
    const { held } = gateSlowReceiver();
    const ids = await insert(...mixed(300, 2));
    const fastIds = ids.filter((_, i) => i % 2 !== 0);
    const slowIds = ids.filter((_, i) => i % 2 === 0);

    // Act
    const loop = startLoop({}, 2);
    loop.wake();
    await until('every fast row delivered', () => receiver.requests.length === fastIds.length, 12_000).catch(
      (e) => {
        throw new Error(`${e.message}: ${receiver.requests.length} of ${fastIds.length}, held ${held()}`);
      },
    );

    // Assess: the slow destination held 2 requests; its other rows were given back untried (no attempt counted),
    // due again after a pause, not claimed and given back in a loop
    await untilSent(fastIds);
    expect(held()).toBe(2);
    const slowRows = await Promise.all(slowIds.map((id) => rowOf(id)));
    expect(slowRows.every((row) => row.attempt === 0)).toBe(true);
    const later = slowRows.filter((row) => row.state === 'Pending' && row.scheduledAt.getTime() > Date.now());
    expect(later.length).toBeGreaterThan(100);
    openGate();
    await untilSent(ids);
  }, 40_000);

  it('waits for a straggler to end, not on a timer, while the stragglers are at their cap', async () => {
    // Prepare: batches of 10, one in flight, 9 slow rows each: the second batch would pass the cap of 10.
    const { held } = gateSlowReceiver();
    const ids = await insert(...mixed(40, 1).map((m, i) => (i % 10 === 0 ? { payload: { i } } : m)));
    const timers = vi.spyOn(globalThis, 'setTimeout');
    // Act
    const loop = startLoop({ batchesInFlight: 1 });
    loop.wake();
    await until('the second batch held', () => held() === 18);
    const before = timers.mock.calls.length;
    await sleep(1000);
    const during = timers.mock.calls.length - before;
    timers.mockRestore();
    openGate();
    await untilSent(ids);
    // Assess: a second of waiting set a few timers (poll intervals), not one per millisecond.
    expect(during).toBeLessThan(100);
  });

  it('settles every batch whole with stragglerQuietMs 0, as before', async () => {
    // Prepare
    const { held } = gateSlowReceiver();
    const ids = await insert(...mixed(100, 10));

    // Act
    const loop = startLoop({ stragglerQuietMs: 0 });
    loop.wake();
    await until('two batches held', () => held() === 2);
    await sleep(500);

    // Assess: the two batches in flight hold their fast rows unsettled and no third batch is claimed.
    expect(held()).toBe(2);
    expect(receiver.requests).toHaveLength(18);
    await expect(rowOf(ids[1] as RowId)).resolves.toMatchObject({ state: 'Processing' });
    openGate();
    await untilSent(ids);
  });

  it('keeps the order of a key: the rows behind a straggling row of the key wait for it', async () => {
    // Prepare: key k's first row goes to the slow destination, its next two to the fast one, in other batches
    // (the claim returns only a key's head while an earlier row of the key is processing).
    const { held } = gateSlowReceiver();
    const [first, second, third] = (await insert(
      { key: 'k', topic: 'slow.job', payload: { n: 1 } },
      { key: 'k', payload: { n: 2 } },
      { key: 'k', payload: { n: 3 } },
    )) as [RowId, RowId, RowId];
    const others = await insert(...mixed(50, 1000).slice(1));

    // Act
    const loop = startLoop();
    loop.wake();
    await until('the unkeyed rows', () => receiver.requests.length === others.length);
    await sleep(300);

    // Assess: k's later rows are not delivered while its first is held; then in order.
    expect(held()).toBe(1);
    expect(receiver.requests.some((r) => JSON.parse(r.body).n !== undefined)).toBe(false);
    openGate();
    await untilSent([first, second, third]);
    const ns = receiver.requests.map((r) => JSON.parse(r.body).n).filter((n) => n !== undefined);
    expect(ns).toEqual([2, 3]);
  });
});

async function untilSent(ids: readonly RowId[]): Promise<void> {
  const giveUpAt = Date.now() + 20_000;
  for (const id of ids) {
    while ((await rowOf(id)).state !== 'Sent') {
      if (Date.now() > giveUpAt) throw new Error(`row ${id} not sent`);
      await sleep(20);
    }
  }
}
