import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError, type RowId } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { describe, expect, it } from 'vitest';
import type { DestinationOptions, RouteOptions } from '../src/options.ts';
import { createPublishers } from '../src/publishers.ts';
import { createTransformRegistry, reject } from '../src/transforms.ts';
import {
  aPoller,
  DATABASE_URL,
  defaultOptions,
  destinationsFor,
  insert,
  receiver,
  rowOf,
  SCHEMA,
  soon,
  store,
  untilDue,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

describe('createOutboxPoller against PostgreSQL and a loopback receiver', () => {
  it('dead-letters a row no route matches, and one whose destination type has no publisher', async () => {
    // Prepare
    const destinations: Record<string, DestinationOptions> = {
      hooks: { type: 'http', url: receiver.url },
      events: { type: 'kafka' },
    };
    const routes: RouteOptions[] = [
      { match: 'orders.#', destination: 'hooks' },
      { match: 'events.*', destination: 'events' },
    ];
    const [unrouted, unsupported] = (await insert({ topic: 'billing.invoice' }, { topic: 'events.x' })) as [
      RowId,
      RowId,
    ];
    // Act
    const report = await aPoller({ destinations, routes }).drain(soon());
    // Assess
    expect(report).toMatchObject({ claimed: 2, dead: 2 });
    expect(await rowOf(unrouted)).toMatchObject({
      state: 'Dead',
      attempt: 0,
      destination: null,
      lastError: 'no route matches topic "billing.invoice"',
    });
    expect(await rowOf(unsupported)).toMatchObject({
      state: 'Dead',
      attempt: 0,
      destination: 'events',
      lastError: 'no publisher supports destination "events" of type "kafka"',
    });
    expect(receiver.requests).toHaveLength(0);
  });

  it('runs the route transform, then the destination transform; a rejection dead-letters the row', async () => {
    // Prepare
    const transforms = createTransformRegistry({
      stamp: (input) => {
        if ((input.payload as { cents?: number }).cents === 0) reject('nothing to bill');
        return { payload: { ...(input.payload as object), stamped: true }, headers: { 'X-Stamp': input.id } };
      },
    });
    const routes: RouteOptions[] = [
      {
        match: 'orders.*',
        destination: 'hooks',
        transform: { jsonata: '{ "cents": total * 100, "topic": $topic }' },
      },
    ];
    const destinations = destinationsFor({ transform: { function: 'stamp' } });
    const [kept, refused] = (await insert({ payload: { total: 2.5 } }, { payload: { total: 0 } })) as [
      RowId,
      RowId,
    ];
    // Act
    const report = await aPoller({ routes, destinations, transforms }).drain(soon());
    // Assess
    expect(report).toMatchObject({ sent: 1, dead: 1 });
    expect(receiver.requests).toHaveLength(1);
    expect(JSON.parse(receiver.requests[0]?.body ?? '')).toEqual({
      cents: 250,
      topic: 'orders.created',
      stamped: true,
    });
    expect(receiver.requests[0]?.headers['x-stamp']).toBe(kept);
    expect(await rowOf(refused)).toMatchObject({
      state: 'Dead',
      attempt: 0,
      lastError: 'transform rejected: function:stamp rejected: nothing to bill',
    });
  });

  it('dead-letters when the destination allows fewer attempts than the row', async () => {
    receiver.handle((_request, response) => {
      response.writeHead(500).end();
    });
    const [id] = (await insert({ maxAttempts: 10 })) as [RowId];
    const poller = aPoller({ destinations: destinationsFor({ maxAttempts: 2 }) });
    await poller.drain(soon());
    await untilDue([id]);
    const report = await poller.drain(soon());
    expect(report).toMatchObject({ dead: 1 });
    // The row's max_attempts is lowered to the destination's: its attempt reached its own max_attempts.
    expect(await rowOf(id)).toMatchObject({
      state: 'Dead',
      attempt: 2,
      maxAttempts: 2,
      lastError: 'HTTP 500 Internal Server Error (destination "hooks" allows 2 attempts)',
    });
  });

  it("retries a message the publisher refuses for good while attempts remain (the state table's only dead reasons)", async () => {
    // Prepare: a publisher that refuses every message for good (undici refusing a request it cannot build answers
    // `dead`; the configuration no longer lets a static header do that, so a publisher of the port stands in).
    const destinations = destinationsFor();
    const publishers = createPublishers(destinations, {
      http: () => ({
        publish: async () => ({ kind: 'dead', error: 'invalid request header: invalid X-Bad header' }),
        close: async () => undefined,
      }),
    });
    const [early, last] = (await insert({ maxAttempts: 3 }, { maxAttempts: 1 })) as [RowId, RowId];
    // Act
    const report = await aPoller({ destinations, publishers }).drain(soon());
    // Assess
    expect(report).toMatchObject({ retried: 1, dead: 1 });
    expect(await rowOf(early)).toMatchObject({ state: 'Pending', attempt: 1 });
    expect((await rowOf(early)).lastError).toMatch(/^invalid request header: .*X-Bad/);
    expect(await rowOf(last)).toMatchObject({ state: 'Dead', attempt: 1 });
    expect(receiver.requests).toHaveLength(0);
  });

  it('delivers every row exactly once when two pollers drain at once', async () => {
    // Prepare: a second store (its own pool), as a second Lambda container would have.
    const second = await openPostgresStore({ url: DATABASE_URL, schema: SCHEMA });
    try {
      const messages = Array.from({ length: 200 }, (_, i) => ({
        key: i % 4 === 0 ? null : `key-${i % 23}`,
        payload: { i },
      }));
      const ids = await insert(...messages);
      // A short pause per answer keeps both drains busy at the same time.
      receiver.handle(async (_request, response) => {
        await sleep(5);
        response.writeHead(200).end();
      });
      const a = aPoller();
      const b = aPoller({ store: second.outbox });
      // Act
      const [ra, rb] = await Promise.all([a.drain(soon(20_000)), b.drain(soon(20_000))]);
      // Assess
      const delivered = receiver.requests.map((r) => r.headers['idempotency-key'] as string);
      expect(delivered).toHaveLength(200);
      expect(new Set(delivered).size).toBe(200);
      expect(ra.sent + rb.sent).toBe(200);
      expect(ra.stale + rb.stale).toBe(0);
      expect(ra.claimed).toBeGreaterThan(0);
      expect(rb.claimed).toBeGreaterThan(0);
      const rows = await Promise.all(ids.map(rowOf));
      expect(rows.every((r) => r.state === 'Sent')).toBe(true);
      for (let k = 0; k < 23; k++) {
        const ofKey = receiver.requests
          .filter((r) => JSON.parse(r.body).i % 4 !== 0 && JSON.parse(r.body).i % 23 === k)
          .map((r) => JSON.parse(r.body).i as number);
        expect(ofKey).toEqual([...ofKey].sort((x, y) => x - y));
      }
    } finally {
      await second.close();
    }
  });

  it('reclaims a claim abandoned by a killed worker once its lease expires, and delivers it', async () => {
    // Prepare: a worker claims and dies.
    const [id] = (await insert({})) as [RowId];
    const abandoned = await store.outbox.claim({ batchSize: 10, leaseMs: 1000 });
    expect(abandoned.map((r) => r.id)).toEqual([id]);
    const poller = aPoller();
    const early = await poller.drain(soon());
    await sleep(1100);
    // Act
    const report = await poller.drain(soon());
    // Assess
    expect(early).toMatchObject({ claimed: 0, reclaimed: { returned: 0, dead: 0 } });
    expect(report).toMatchObject({ reclaimed: { returned: 1, dead: 0 }, claimed: 1, sent: 1 });
    expect(await rowOf(id)).toMatchObject({ state: 'Sent', attempt: 1 });
  });

  it('never settles a row whose claim it lost; the stale settle is counted', async () => {
    // Prepare: poller A's delivery outlives its lease; poller B reclaims and delivers the row meanwhile.
    const [id] = (await insert({})) as [RowId];
    let release: (() => void) | undefined;
    receiver.handle((_request, response) => {
      if (release === undefined) release = () => response.writeHead(200).end();
      else response.writeHead(200).end();
    });
    const slow = aPoller({ options: { ...defaultOptions, claimTimeoutMs: 1000 } });
    const fast = aPoller();
    const drainA = slow.drain(soon());
    while (release === undefined) await sleep(10);
    await sleep(1100);
    // Act
    const reportB = await fast.drain(soon());
    release();
    const reportA = await drainA;
    // Assess
    expect(reportB).toMatchObject({ reclaimed: { returned: 1 }, sent: 1 });
    expect(reportA).toMatchObject({ claimed: 1, sent: 0, stale: 1 });
    expect(await rowOf(id)).toMatchObject({ state: 'Sent', attempt: 1 });
  });

  it('does not claim when the deadline leaves no time, and reports why it stopped', async () => {
    await insert({});
    const poller = aPoller();
    const late = await poller.drain({ deadline: Date.now() + 100 });
    const done = await poller.drain(soon());
    const nothing = await poller.drain(soon());
    expect(late).toMatchObject({ claimed: 0, stoppedFor: 'time' });
    expect(done).toMatchObject({ sent: 1, stoppedFor: 'empty' });
    expect(nothing).toMatchObject({ claimed: 0, batches: 0, stoppedFor: 'empty' });
  });

  it('stops claiming when the budget signal aborts, after settling the batch in flight', async () => {
    // Prepare: 3 rows of one key, batch size 1, and the signal aborts during the first delivery.
    await insert({ key: 'k' }, { key: 'k' }, { key: 'k' });
    const controller = new AbortController();
    receiver.handle((_request, response) => {
      controller.abort();
      response.writeHead(200).end();
    });
    const poller = aPoller({ options: { ...defaultOptions, batchSize: 1 } });
    // Act
    const report = await poller.drain({ deadline: Date.now() + 10_000, signal: controller.signal });
    // Assess
    expect(report).toMatchObject({ claimed: 1, sent: 1, stoppedFor: 'aborted' });
  });

  it('close() lets the batch in flight settle, then refuses to drain', async () => {
    // Prepare: two rows of one key, one per batch; close() is called during the first delivery.
    const [first, second] = (await insert({ key: 'k' }, { key: 'k' })) as [RowId, RowId];
    let answer: (() => void) | undefined;
    receiver.handle((_request, response) => {
      answer = () => response.writeHead(200).end();
    });
    const poller = aPoller({ options: { ...defaultOptions, batchSize: 1 } });
    const draining = poller.drain(soon());
    while (answer === undefined) await sleep(10);
    // Act
    const closing = poller.close();
    answer();
    const [report] = await Promise.all([draining, closing]);
    const after = await poller.drain(soon());
    // Assess
    expect(report).toMatchObject({ claimed: 1, sent: 1, stoppedFor: 'closed' });
    expect(after).toMatchObject({ claimed: 0, stoppedFor: 'closed' });
    expect((await rowOf(first)).state).toBe('Sent');
    expect((await rowOf(second)).state).toBe('Pending');
  });

  it('refuses a route to an unknown destination, a bad pattern and an unknown transform at construction', () => {
    let error: unknown;
    try {
      aPoller({
        routes: [
          { match: 'a..b', destination: 'hooks' },
          { match: 'x.*', destination: 'nowhere' },
          { match: '#', destination: 'hooks', transform: { function: 'missing' } },
        ],
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.path)).toEqual([
      'routes[0].match',
      'routes[1].destination',
      'routes[2].transform.function',
    ]);
  });
});
