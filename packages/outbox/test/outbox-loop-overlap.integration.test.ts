/**
 * The local loop's drains overlap: a drain that stops for time returns without waiting for the requests it started,
 * and the next drain claims beside them, so a slow request holds up neither the rows of other destinations nor
 * those of other keys. The poller's limits (`batchesInFlight`, a destination's `maxConcurrency`) still hold across
 * the drains, every row is settled and reported, and stopping the loop waits for the requests of every drain.
 * Two HTTP destinations: `slow` (its own receiver, answering after 1.5 s) and `hooks` (the harness's receiver).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { OutboxStore, RowId } from '@queuebox/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DestinationOptions, RouteOptions } from '../src/options.ts';
import { type OutboxLoop, startOutboxLoop } from '../src/outbox-loop.ts';
import type { OutboxDrainReport, SettledOutboxRow } from '../src/poller.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';
import {
  aPoller,
  defaultOptions,
  insert,
  receiver,
  rowOf,
  store,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

const SLOW_MS = 1500;
/** How soon a row of the fast destination must be delivered beside a slow request in flight. */
const FAST_MS = 300;

let slow: HttpReceiver;
const loops: { loop: OutboxLoop; stop: AbortController }[] = [];

beforeAll(async () => {
  slow = await startHttpReceiver();
});

afterEach(async () => {
  for (const { loop, stop } of loops.splice(0)) {
    stop.abort();
    await loop.done;
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
const destinations = (): Record<string, DestinationOptions> => ({
  slow: { type: 'http', url: slow.url, timeoutMs: 2000 },
  hooks: { type: 'http', url: receiver.url, timeoutMs: 2000 },
});

/** The receiver answers 204 after `ms`; the result counts the requests it holds (`now`) and held at once (`most`). */
function answerSlowly(target: HttpReceiver, ms: number): { readonly now: number; readonly most: number } {
  let now = 0;
  let most = 0;
  target.handle(async (_request, response) => {
    most = Math.max(most, ++now);
    await sleep(ms);
    now--;
    response.writeHead(204).end();
  });
  return {
    get now() {
      return now;
    },
    get most() {
      return most;
    },
  };
}

async function until(what: string, done: () => boolean, withinMs = 10_000): Promise<void> {
  const giveUpAt = Date.now() + withinMs;
  while (!done()) {
    if (Date.now() > giveUpAt) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

async function untilSent(id: RowId): Promise<void> {
  const giveUpAt = Date.now() + 10_000;
  while ((await rowOf(id)).state !== 'Sent') {
    if (Date.now() > giveUpAt) throw new Error(`row ${id} not sent`);
    await sleep(20);
  }
}

/** Starts the loop on the poller; `afterEach` stops it. */
function aLoop(poller: ReturnType<typeof aPoller>, options: Parameters<typeof startOutboxLoop>[1] = {}) {
  const stop = new AbortController();
  const loop = startOutboxLoop(poller, { pollIntervalMs: 50, ...options, signal: stop.signal });
  loops.push({ loop, stop });
  return { loop, stop };
}

/** Puts a row for the slow destination in flight and resolves once its request reached the receiver. */
async function aSlowRequestInFlight(loop: OutboxLoop): Promise<RowId> {
  answerSlowly(slow, SLOW_MS);
  const [id] = (await insert({ topic: 'slow.job' })) as [RowId];
  loop.wake();
  await until('the slow request', () => slow.requests.length === 1);
  return id;
}

describe('startOutboxLoop beside a slow request', () => {
  it('delivers rows of another destination at once while a drain that stopped for time still waits for a slow request', async () => {
    // Prepare: a 2.5 s budget fits the 2 s timeout and twice the 0.2 s settle reserve, so each drain claims for
    // 0.3 s only and then stops for time; the slow request (1.5 s) outlives the drain that started it.
    const poller = aPoller({ destinations: destinations(), routes });
    const { loop } = aLoop(poller, { drainBudgetMs: 2500 });
    const slowRow = await aSlowRequestInFlight(loop);
    await sleep(400);

    // Act
    const writtenAt = Date.now();
    const fast = await insert({}, {}, {});
    loop.wake();
    await until('the fast rows', () => receiver.requests.length === 3);
    const latency = Date.now() - writtenAt;

    // Assess
    expect(latency).toBeLessThan(FAST_MS);
    expect(slow.requests).toHaveLength(1);
    for (const id of fast) await untilSent(id);
    await untilSent(slowRow);
    expect(slow.requests).toHaveLength(1);
  });

  it('claims again after its poll interval while a slow request is in flight, without a wake-up', async () => {
    // Prepare: the default budget (claiming for half a minute); the fast rows are written without a wake-up, as
    // by another process without LISTEN/NOTIFY or a retry coming due, so only the poll interval can find them.
    const poller = aPoller({ destinations: destinations(), routes });
    const { loop } = aLoop(poller);
    await aSlowRequestInFlight(loop);

    // Act
    const writtenAt = Date.now();
    await insert({}, {});
    await until('the fast rows', () => receiver.requests.length === 2);

    // Assess
    expect(Date.now() - writtenAt).toBeLessThan(FAST_MS);
  });

  it('delivers the next row of a key at once when the row before it settled, beside a slow request of another key', async () => {
    // Prepare: a claim takes one row per key (the key's head); the next row of key k is claimable only once the
    // first settled.
    const poller = aPoller({ destinations: destinations(), routes });
    const { loop } = aLoop(poller);
    await aSlowRequestInFlight(loop);

    // Act
    const writtenAt = Date.now();
    const [first, second] = (await insert(
      { key: 'k', payload: { n: 1 } },
      { key: 'k', payload: { n: 2 } },
    )) as [RowId, RowId];
    loop.wake();
    await until('both rows of key k', () => receiver.requests.length === 2);

    // Assess
    expect(Date.now() - writtenAt).toBeLessThan(FAST_MS);
    expect(receiver.requests.map((r) => JSON.parse(r.body))).toEqual([{ n: 1 }, { n: 2 }]);
    await untilSent(first);
    await untilSent(second);
  });
});

describe('startOutboxLoop with a slow request in flight and nothing to claim', () => {
  it('claims once per poll interval, not in a tight loop', async () => {
    // Prepare: count the claims of the default budget's drain while the slow request is out.
    let claims = 0;
    const real = store.outbox;
    const counting: OutboxStore = {
      insert: (messages) => real.insert(messages),
      claim: (options) => {
        claims++;
        return real.claim(options);
      },
      markSent: (items) => real.markSent(items),
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: (limit) => real.reclaimExpired(limit),
    };
    const poller = aPoller({ store: counting, destinations: destinations(), routes });
    const { loop } = aLoop(poller, { pollIntervalMs: 100 });
    await aSlowRequestInFlight(loop);

    // Act
    const before = claims;
    await sleep(1000);
    const during = claims - before;

    // Assess: about 10 in a second at 100 ms.
    expect(during).toBeGreaterThanOrEqual(5);
    expect(during).toBeLessThanOrEqual(13);
  });
});

describe('startOutboxLoop with overlapping drains', () => {
  it('keeps at most batchesInFlight × batchSize requests in flight across the drains', async () => {
    // Prepare: batches of 5, 2 batches at once: at most 10 requests at a time. Each drain (1.5 s budget, 1 s
    // timeout, 0.2 s reserve) claims for 0.3 s only, and the requests take 0.6 s, so drains stop for time with
    // batches in flight and the next one claims beside them. Rows come 4 every 0.1 s, so claims come back short and
    // a drain claims again on its poll interval while its batches are out.
    const inFlight = answerSlowly(receiver, 600);
    const reports: OutboxDrainReport[] = [];
    const inFlightAtHandOff: number[] = [];
    const poller = aPoller({
      destinations: { hooks: { type: 'http', url: receiver.url, timeoutMs: 1000 } },
      options: { ...defaultOptions, batchSize: 5, batchesInFlight: 2 },
    });
    const { stop, loop } = aLoop(poller, {
      drainBudgetMs: 1500,
      onDrain(report) {
        reports.push(report);
        if (report.stoppedFor === 'time') inFlightAtHandOff.push(inFlight.now);
      },
    });

    // Act
    const ids: RowId[] = [];
    for (let wave = 0; wave < 10; wave++) {
      ids.push(...(await insert(...Array.from({ length: 4 }, (_, n) => ({ payload: { wave, n } })))));
      await sleep(100);
    }
    await until('every row', () => receiver.requests.length >= 40, 20_000);
    stop.abort();
    await loop.done;

    // Assess
    expect(inFlight.most).toBeLessThanOrEqual(10);
    expect(inFlight.most).toBeGreaterThan(5);
    expect(Math.max(...inFlightAtHandOff)).toBeGreaterThan(0);
    expect(reports.reduce((sum, r) => sum + r.sent, 0)).toBe(40);
    for (const id of ids) await expect(rowOf(id)).resolves.toMatchObject({ state: 'Sent', attempt: 0 });
  });

  it("keeps a destination's maxConcurrency across the drains", async () => {
    // Prepare: as above, but the destination allows 3 requests at once.
    const inFlight = answerSlowly(receiver, 300);
    const ids = await insert(...Array.from({ length: 20 }, (_, n) => ({ payload: { n } })));
    const poller = aPoller({
      destinations: { hooks: { type: 'http', url: receiver.url, timeoutMs: 1000, maxConcurrency: 3 } },
      options: { ...defaultOptions, batchSize: 5, batchesInFlight: 2 },
    });

    // Act
    const { stop, loop } = aLoop(poller, { drainBudgetMs: 1500 });
    await until('every row', () => receiver.requests.length >= 20, 20_000);
    stop.abort();
    await loop.done;

    // Assess
    expect(inFlight.most).toBe(3);
    for (const id of ids) await expect(rowOf(id)).resolves.toMatchObject({ state: 'Sent' });
  });

  it('on stop waits for the request of a drain that already returned, settles it and reports it', async () => {
    // Prepare: the slow request outlives the drain that started it (0.3 s of claiming, as in the first test).
    const reports: OutboxDrainReport[] = [];
    const settled: SettledOutboxRow[] = [];
    const poller = aPoller({
      destinations: destinations(),
      routes,
      onSettled: (rows) => settled.push(...rows),
    });
    const { stop, loop } = aLoop(poller, { drainBudgetMs: 2500, onDrain: (report) => reports.push(report) });
    const slowRow = await aSlowRequestInFlight(loop);
    await sleep(400);
    expect(reports.some((r) => r.stoppedFor === 'time' && r.claimed === 1 && r.sent === 0)).toBe(true);

    // Act
    stop.abort();
    await loop.done;

    // Assess
    await expect(rowOf(slowRow)).resolves.toMatchObject({ state: 'Sent', attempt: 0 });
    expect(settled.map((s) => [s.row.id, s.outcome, s.destination])).toEqual([[slowRow, 'sent', 'slow']]);
    expect(reports.reduce((sum, r) => sum + r.sent, 0)).toBe(1);
    expect(reports.at(-1)).toMatchObject({ stoppedFor: 'aborted', sent: 1 });
  });

  it('when stopped right after a drain handed over, waits for its request, settles it and reports it', async () => {
    // Prepare: the signal aborts in onDrain, on the report of the drain that claimed the slow row and stopped for
    // time: the loop starts no other drain that could wait for the request.
    answerSlowly(slow, 800);
    const reports: OutboxDrainReport[] = [];
    const stop = new AbortController();
    const poller = aPoller({ destinations: destinations(), routes });
    const loop = startOutboxLoop(poller, {
      pollIntervalMs: 50,
      drainBudgetMs: 2500,
      signal: stop.signal,
      onDrain(report) {
        reports.push(report);
        if (report.stoppedFor === 'time' && report.claimed > 0) stop.abort();
      },
    });
    const [slowRow] = (await insert({ topic: 'slow.job' })) as [RowId];
    loop.wake();

    // Act
    await loop.done;

    // Assess
    await expect(rowOf(slowRow)).resolves.toMatchObject({ state: 'Sent' });
    expect(reports.at(-2)).toMatchObject({ stoppedFor: 'time', claimed: 1, sent: 0 });
    expect(reports.at(-1)).toMatchObject({ stoppedFor: 'aborted', claimed: 0, sent: 1 });
  });

  it('reports a failed settle of a drain that handed over as a failed drain, and keeps running', async () => {
    // Prepare: the settle of the slow row fails; the drain that claimed it has returned by then.
    answerSlowly(slow, 800);
    const real = store.outbox;
    let slowRow: RowId | undefined;
    const failing: OutboxStore = {
      insert: (messages) => real.insert(messages),
      claim: (options) => real.claim(options),
      markSent: (items) =>
        items.some((item) => item.id === slowRow)
          ? Promise.reject(new Error('connection reset'))
          : real.markSent(items),
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: (limit) => real.reclaimExpired(limit),
    };
    const reports: OutboxDrainReport[] = [];
    const errors: unknown[] = [];
    const poller = aPoller({ store: failing, destinations: destinations(), routes });
    const { loop } = aLoop(poller, {
      drainBudgetMs: 2500,
      onDrain: (report) => reports.push(report),
      onError: (error) => errors.push(error),
    });
    [slowRow] = (await insert({ topic: 'slow.job' })) as [RowId];
    loop.wake();
    await until('the slow request', () => slow.requests.length === 1);

    // Act
    await until('the failure', () => errors.length > 0);
    const [fast] = (await insert({})) as [RowId];
    loop.wake();

    // Assess
    expect(reports.some((r) => r.stoppedFor === 'time' && r.claimed === 1)).toBe(true);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('connection reset');
    await untilSent(fast);
    // The row stays processing until its lease expires, then it is delivered again.
    await expect(rowOf(slowRow)).resolves.toMatchObject({ state: 'Processing' });
  });

  it('poller.close() waits for the request of a drain that already returned', async () => {
    const poller = aPoller({ destinations: destinations(), routes });
    const { loop } = aLoop(poller, { drainBudgetMs: 2500 });
    const slowRow = await aSlowRequestInFlight(loop);
    await sleep(400);

    // Act
    await poller.close();

    // Assess
    await expect(rowOf(slowRow)).resolves.toMatchObject({ state: 'Sent', attempt: 0 });
  });
});

describe('poller.drain without a loop (outbox-tick)', () => {
  it('still waits for the requests it started when it stops for time', async () => {
    answerSlowly(slow, 600);
    const [id] = (await insert({ topic: 'slow.job' })) as [RowId];
    const poller = aPoller({ destinations: destinations(), routes });

    // Act: 2.5 s of budget, 0.3 s of claiming.
    const report = await poller.drain({ deadline: Date.now() + 2500 });

    // Assess
    expect(report).toMatchObject({ claimed: 1, sent: 1, stoppedFor: 'time' });
    await expect(rowOf(id)).resolves.toMatchObject({ state: 'Sent' });
  });
});
