import { setTimeout as sleep } from 'node:timers/promises';
import { type OutboxStore, type RowId, StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { startOutboxLoop } from '../src/outbox-loop.ts';
import type { OutboxDrainReport } from '../src/poller.ts';
import {
  aPoller,
  defaultOptions,
  insert,
  receiver,
  rowIdOf,
  rowOf,
  soon,
  store,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

describe('createOutboxPoller with two batches in flight', () => {
  /** store.outbox with every claim and reclaim counted. */
  function countingStore() {
    const real = store.outbox;
    const calls = { claims: [] as number[], reclaims: 0 };
    const counted: OutboxStore = {
      ...real,
      insert: (messages) => real.insert(messages),
      markSent: (items) => real.markSent(items),
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: (limit) => {
        calls.reclaims++;
        return real.reclaimExpired(limit);
      },
      claim: async (options) => {
        const rows = await real.claim(options);
        calls.claims.push(rows.length);
        return rows;
      },
    };
    return { counted, calls };
  }

  it('ends a drain whose claim came back short once its batch settled, without another claim', async () => {
    // Prepare: three unkeyed rows, fewer than the batch of 10.
    await insert({}, {}, {});
    const { counted, calls } = countingStore();
    const poller = aPoller({ store: counted });
    // Act
    const report = await poller.drain(soon());
    // Assess: one claim, no empty one after it.
    expect(report).toMatchObject({ claimed: 3, sent: 3, stoppedFor: 'empty' });
    expect(calls.claims).toEqual([3]);
  });

  it('claims again after a short claim when a settled batch had keyed rows, so the rows behind them go too', async () => {
    // Prepare: two rows of one key; only the head is claimable until it is sent.
    const ids = await insert({ key: 'k' }, { key: 'k' });
    const { counted, calls } = countingStore();
    const poller = aPoller({ store: counted });
    // Act
    const report = await poller.drain(soon());
    // Assess
    expect(report).toMatchObject({ claimed: 2, sent: 2, stoppedFor: 'empty' });
    expect(calls.claims).toEqual([1, 1, 0]);
    expect(receiver.requests.map(rowIdOf)).toEqual(ids);
  });

  it('claims again at once after a wake-up while the batch of a short claim is out', async () => {
    // Prepare: the receiver holds every answer until told.
    const held: (() => void)[] = [];
    receiver.handle((_request, response) => {
      held.push(() => response.writeHead(200).end());
    });
    await insert({});
    const { counted, calls } = countingStore();
    const poller = aPoller({ store: counted });
    const drained = poller.drain(soon());
    while (held.length < 1) await sleep(10);
    // Act: a row written while the first one is out, and its wake-up.
    await insert({});
    poller.wake?.();
    while (held.length < 2) await sleep(10);
    for (const answer of held) answer();
    const report = await drained;
    // Assess: the second row was claimed and posted while the first was still unanswered.
    expect(report).toMatchObject({ claimed: 2, sent: 2, stoppedFor: 'empty' });
    expect(calls.claims).toEqual([1, 1]);
  });

  it('lets the next claim fill for fillMs after a short claim of at least fillMinRows rows, not after fewer', async () => {
    /** Three rows out, one more written and announced while they are, the answers then released. */
    async function scenario(fillMinRows: number) {
      const held: (() => void)[] = [];
      receiver.handle((_request, response) => {
        held.push(() => response.writeHead(200).end());
      });
      await insert({}, {}, {});
      const { counted, calls } = countingStore();
      const sleeps: number[] = [];
      const now = Date.now();
      const poller = aPoller({
        store: counted,
        options: { ...defaultOptions, fillMs: 20, fillMinRows },
        // A still clock: the pause is exactly fillMs after the claim's answer.
        clock: { now: () => now },
        sleep: async (ms) => {
          sleeps.push(ms);
        },
      });
      const drained = poller.drain({ deadline: now + 10_000 });
      while (held.length < 3) await sleep(10);
      await insert({});
      poller.wake?.();
      while (held.length < 4) await sleep(10);
      for (const answer of held) answer();
      const report = await drained;
      return { report, claims: calls.claims, sleeps };
    }
    // Act
    const underLoad = await scenario(2);
    const trickle = await scenario(4);
    // Assess: the claim after the wake-up waited once, for fillMs, when the short claim had at least fillMinRows.
    expect(underLoad).toMatchObject({ report: { claimed: 4, sent: 4 }, claims: [3, 1], sleeps: [20] });
    expect(trickle).toMatchObject({ report: { claimed: 4, sent: 4 }, claims: [3, 1], sleeps: [] });
  });

  it('claims a row written while one batch is out and the settle of a delivered one is being written', async () => {
    // Prepare: the first markSent is held, and so is the answer to the second request.
    const events: string[] = [];
    const held: (() => void)[] = [];
    let settleStarted = false;
    const real = store.outbox;
    const slowSettle: OutboxStore = {
      ...real,
      insert: (messages) => real.insert(messages),
      markSent: async (items) => {
        if (!settleStarted) {
          settleStarted = true;
          await new Promise<void>((resolve) => held.push(resolve));
        }
        const report = await real.markSent(items);
        events.push('settled');
        return report;
      },
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: (limit) => real.reclaimExpired(limit),
      claim: (options) => real.claim(options),
    };
    let requests = 0;
    receiver.handle((_request, response) => {
      events.push('post');
      requests++;
      if (requests === 2) held.push(() => response.writeHead(200).end());
      else response.writeHead(200).end();
    });
    await insert({});
    const poller = aPoller({ store: slowSettle });
    const drained = poller.drain(soon());
    while (!settleStarted) await sleep(10);
    await insert({});
    poller.wake?.();
    while (requests < 2) await sleep(10);
    // Act: a third row while the second is out (one batch delivering) and the first one's settle is held.
    await insert({});
    poller.wake?.();
    for (let waited = 0; requests < 3 && waited < 3000; waited += 10) await sleep(10);
    for (const release of held) release();
    const report = await drained;
    // Assess: the third row went out before anything was settled; two batches in flight did not hold it back,
    // since one of them was only writing its settle.
    expect(report).toMatchObject({ claimed: 3, sent: 3, stoppedFor: 'empty' });
    expect(events.slice(0, 3)).toEqual(['post', 'post', 'post']);
  });

  it('sends its first claim without waiting for the reclaim step', async () => {
    // Prepare: the reclaim step is held until told.
    const events: string[] = [];
    let releaseReclaim: (() => void) | undefined;
    const real = store.outbox;
    const slowReclaim: OutboxStore = {
      ...real,
      insert: (messages) => real.insert(messages),
      markSent: (items) => real.markSent(items),
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: async (limit) => {
        await new Promise<void>((resolve) => {
          releaseReclaim = resolve;
        });
        events.push('reclaimed');
        return real.reclaimExpired(limit);
      },
      claim: async (options) => {
        events.push('claim');
        return real.claim(options);
      },
    };
    await insert({});
    const poller = aPoller({ store: slowReclaim });
    // Act
    const drained = poller.drain(soon());
    for (let waited = 0; !events.includes('claim') && waited < 3000; waited += 10) await sleep(10);
    while (releaseReclaim === undefined) await sleep(10);
    releaseReclaim();
    const report = await drained;
    // Assess: the row went out in this drain, claimed while the reclaim step was still running.
    expect(events[0]).toBe('claim');
    expect(report).toMatchObject({ claimed: 1, sent: 1, stoppedFor: 'empty' });
  });

  it('runs the reclaim step at most once per reclaimIntervalMs', async () => {
    // Prepare
    const { counted, calls } = countingStore();
    const every = aPoller({ store: counted, options: { ...defaultOptions, reclaimIntervalMs: 0 } });
    const { counted: counted2, calls: calls2 } = countingStore();
    const hourly = aPoller({ store: counted2, options: { ...defaultOptions, reclaimIntervalMs: 3_600_000 } });
    // Act
    for (let i = 0; i < 3; i++) {
      await every.drain(soon());
      await hourly.drain(soon());
    }
    // Assess: the first drain of a poller always reclaims.
    expect(calls.reclaims).toBe(3);
    expect(calls2.reclaims).toBe(1);
  });

  it('reclaims a claim that expires during a long drain beside a later claim, not at the next drain', async () => {
    // Prepare: another process claimed row X with a 300 ms lease and died; the loop's drain has a 20 s budget and
    // rows keep coming, so it claims for all of it (a loop's drain ends only for time).
    // The receiver answers after 100 ms, so a batch is always out and the drain never finds itself idle.
    const [x] = (await insert({ payload: { x: true } })) as [RowId];
    const dead = await store.outbox.claim({ batchSize: 1, leaseMs: 300 });
    expect(dead.map((r) => r.id)).toEqual([x]);
    receiver.handle(async (_request, response) => {
      await sleep(100);
      response.writeHead(200).end();
    });
    const poller = aPoller({ options: { ...defaultOptions, reclaimIntervalMs: 200 } });
    const drains: OutboxDrainReport[] = [];
    const stop = new AbortController();
    // A row due before the loop starts: its first claim must find work, not race the first insert below (it ended
    // empty when it ran first, once in a few runs).
    await insert({});
    const loop = startOutboxLoop(poller, {
      pollIntervalMs: 50,
      drainBudgetMs: 20_000,
      signal: stop.signal,
      onDrain: (report) => drains.push(report),
    });
    // Act: a row every 20 ms until X is delivered (or 5 s).
    const giveUpAt = Date.now() + 5_000;
    while (!receiver.requests.some((r) => JSON.parse(r.body).x === true) && Date.now() < giveUpAt) {
      await insert({});
      await sleep(20);
    }
    const drainsBefore = drains.length;
    stop.abort();
    await loop.done;
    // Assess: X went out during the first drain, once its lease had ended.
    expect(receiver.requests.some((r) => JSON.parse(r.body).x === true)).toBe(true);
    expect(drainsBefore).toBe(0);
    await expect(rowOf(x)).resolves.toMatchObject({ state: 'Sent', attempt: 1 });
  });

  it('writes a settle again while the database is briefly unavailable, instead of leaving the row to its lease', async () => {
    // Prepare: markSent fails twice as a restarting database does, then works.
    let failures = 0;
    const blipping = outboxWith({
      markSent: async (items) => {
        if (failures < 2) {
          failures++;
          throw new StoreUnavailableError('the database system is shutting down (test)');
        }
        return store.outbox.markSent(items);
      },
    });
    const [id] = (await insert({})) as [RowId];
    const poller = aPoller({ store: blipping });
    // Act
    const report = await poller.drain(soon());
    // Assess: delivered once, settled on the third try, in this drain.
    expect(failures).toBe(2);
    expect(receiver.requests).toHaveLength(1);
    expect(report).toMatchObject({ claimed: 1, sent: 1 });
    await expect(rowOf(id)).resolves.toMatchObject({ state: 'Sent', attempt: 0 });
  });

  it('leaves no store call retrying after the drain returned when another call of the settle failed for good', async () => {
    // Prepare: two rows, one answered 200 and one 500, so a settle has a markSent and a retry; markSent fails for
    // good (not an outage), retry as if the database were down.
    let retries = 0;
    const broken = outboxWith({
      markSent: async () => {
        throw new Error('constraint broke (test)');
      },
      retry: async () => {
        retries++;
        throw new StoreUnavailableError('connection refused (test)');
      },
    });
    let n = 0;
    receiver.handle((_request, response) => {
      response.writeHead(n++ === 0 ? 200 : 500).end();
    });
    await insert({}, {});
    const poller = aPoller({ store: broken, options: { ...defaultOptions, batchSize: 2 } });
    // Act
    const outcome = await poller.drain(soon()).then(
      () => undefined,
      (error: unknown) => error,
    );
    const retriesAtReturn = retries;
    await sleep(700);
    // Assess: the drain failed with markSent's error, and the retry had stopped before it returned.
    expect(String(outcome)).toContain('constraint broke');
    expect(retries).toBe(retriesAtReturn);
  });

  it('stops trying a settle again once the close is told to give up', async () => {
    // Prepare: markSent never works.
    let tries = 0;
    const down = outboxWith({
      markSent: async () => {
        tries++;
        throw new StoreUnavailableError('connection refused (test)');
      },
    });
    await insert({});
    const poller = aPoller({ store: down });
    // Act: close it once the settle has failed twice, and give up at once (a closing poller otherwise tries until
    // the batch's deadline: poller-stop-outage.integration.test.ts).
    const drained = poller.drain({ deadline: Date.now() + 20_000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    while (tries < 2) await sleep(10);
    const closedAt = Date.now();
    await poller.close({ signal: AbortSignal.abort() });
    const closed = poller.closeReport?.();
    const outcome = await drained;
    // Assess: the drain fails with the outage at once, not at its 20 s deadline; the row is counted as left.
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect(Date.now() - closedAt).toBeLessThan(1_000);
    expect(closed).toEqual({ unsettled: 1, unsettledSent: 1 });
  });

  it('runs the reclaim step again at once when the clock stepped back (NTP, a resumed VM), not an hour later', async () => {
    // Prepare: the poller's clock, which the test steps.
    let offset = 0;
    const clock = { now: () => Date.now() + offset };
    const { counted, calls } = countingStore();
    const hourly = aPoller({
      store: counted,
      clock,
      options: { ...defaultOptions, reclaimIntervalMs: 3_600_000 },
    });
    // Act
    await hourly.drain(soon());
    offset = -3_600_000;
    await hourly.drain(soon());
    offset = -3_599_000;
    await hourly.drain(soon());
    // Assess: the first drain, the one after the step back; not the one a second later on the new time line.
    expect(calls.reclaims).toBe(2);
  });

  it('settles the batch in flight before a failed claim ends the drain', async () => {
    // Prepare: the claim that runs while the first batch is out fails.
    let claims = 0;
    const real = store.outbox;
    const flaky: OutboxStore = {
      ...real,
      insert: (messages) => real.insert(messages),
      markSent: (items) => real.markSent(items),
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: (limit) => real.reclaimExpired(limit),
      claim: async (options) => {
        claims++;
        if (claims === 2) throw new Error('connection reset');
        return real.claim(options);
      },
    };
    const [id] = (await insert({})) as [RowId];
    let answer: (() => void) | undefined;
    receiver.handle((_request, response) => {
      answer = () => response.writeHead(200).end();
    });
    // Batch size 1: the first claim comes back full, so the next claim goes out while its batch is delivered (a
    // short claim would make the drain wait for its batch and end instead).
    const poller = aPoller({ store: flaky, options: { ...defaultOptions, batchSize: 1 } });
    // Act
    const drained = poller.drain(soon());
    let ended = false;
    drained.then(
      () => (ended = true),
      () => (ended = true),
    );
    while (answer === undefined || claims < 2) await sleep(10);
    await sleep(50);
    const endedWhileBatchOut = ended;
    answer();
    // Assess
    expect(endedWhileBatchOut).toBe(false);
    await expect(drained).rejects.toThrow('connection reset');
    expect(await rowOf(id)).toMatchObject({ state: 'Sent' });
  });
});

/** The harness's outbox store with some of its calls replaced. */
function outboxWith(overrides: Partial<OutboxStore>): OutboxStore {
  const real = store.outbox;
  return {
    insert: (messages) => real.insert(messages),
    claim: (options) => real.claim(options),
    markSent: (items) => real.markSent(items),
    retry: (items) => real.retry(items),
    markDead: (items) => real.markDead(items),
    release: (items) => real.release(items),
    get: (id) => real.get(id),
    reclaimExpired: (limit) => real.reclaimExpired(limit),
    ...overrides,
  };
}
