import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ConfigError,
  type NewOutboxMessage,
  type OutboxRow,
  type OutboxStore,
  type RowId,
  type Store,
} from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DestinationOptions, RouteOptions } from '../src/options.ts';
import { startOutboxLoop } from '../src/outbox-loop.ts';
import { createOutboxPoller, type OutboxPollerDeps, type OutboxPollerOptions } from '../src/poller.ts';
import { createPublishers, defaultPublisherFactories, type PublisherSet } from '../src/publishers.ts';
import { createTransformRegistry, reject } from '../src/transforms.ts';
import { closedPort, type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

const DATABASE_URL = process.env.QUEUEBOX_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = `outbox_poller_${randomBytes(4).toString('hex')}`;
const SECRET = `whsec_${Buffer.from('poller test signing key!').toString('base64')}`;

let store: Store;
let receiver: HttpReceiver;
let failed = false;
const openPublishers: PublisherSet[] = [];

beforeAll(async () => {
  receiver = await startHttpReceiver();
  store = await openPostgresStore({ url: DATABASE_URL, schema: SCHEMA });
  await store.migrate();
});

afterEach(async (context) => {
  if (context.task.result?.state === 'fail') failed = true;
  await Promise.all(openPublishers.splice(0).map((p) => p.close()));
  receiver.reset();
  await sql(`DELETE FROM "${SCHEMA}".outbox`);
});

afterAll(async () => {
  await store?.close();
  await receiver?.close();
  // A failing file keeps its schema for inspection.
  if (failed) console.log(`outbox poller tests failed; schema ${SCHEMA} kept for inspection`);
  else await sql(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
});

async function sql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// factories

const anOutboxMessage = (over: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  topic: 'orders.created',
  key: null,
  payload: { n: 1 },
  headers: {},
  maxAttempts: 5,
  ...over,
});

const destinationsFor = (over: Partial<DestinationOptions> = {}): Record<string, DestinationOptions> => ({
  hooks: { type: 'http', url: receiver.url, timeoutMs: 2000, ...over },
});

const defaultRoutes: RouteOptions[] = [{ match: 'orders.#', destination: 'hooks' }];

const defaultOptions: OutboxPollerOptions = {
  batchSize: 10,
  claimTimeoutMs: 30_000,
  maxAttempts: 5,
  backoff: { baseMs: 100, maxMs: 10_000 },
  settleReserveMs: 200,
};

function aPoller(over: Partial<OutboxPollerDeps> = {}) {
  const destinations = over.destinations ?? destinationsFor();
  const publishers = createPublishers(destinations, defaultPublisherFactories);
  openPublishers.push(publishers);
  return createOutboxPoller({
    store: store.outbox,
    publishers,
    routes: defaultRoutes,
    destinations,
    options: defaultOptions,
    // Jitter at its top: the delay is exactly the ceiling, min(maxMs, baseMs × 2^(attempt−1)).
    random: () => 1,
    ...over,
  });
}

const soon = (ms = 10_000) => ({ deadline: Date.now() + ms });

async function insert(...messages: Partial<NewOutboxMessage>[]): Promise<RowId[]> {
  return store.outbox.insert(messages.map(anOutboxMessage));
}

async function rowOf(id: RowId): Promise<OutboxRow> {
  const row = await store.outbox.get(id);
  if (row === undefined) throw new Error(`row ${id} is gone`);
  return row;
}

/** Waits until every given row is due again (its scheduled_at has passed). */
async function untilDue(ids: readonly RowId[]): Promise<void> {
  const rows = await Promise.all(ids.map(rowOf));
  const latest = Math.max(...rows.map((r) => r.scheduledAt.getTime()));
  const wait = latest - Date.now() + 20;
  if (wait > 0) await sleep(wait);
}

/** Verifies a delivery the way a Standard Webhooks receiver does. */
function signatureValid(headers: Record<string, string>, body: string): boolean {
  const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`)
    .digest();
  return (headers['webhook-signature'] ?? '').split(' ').some((entry) => {
    const [version, value] = entry.split(',', 2);
    const given = Buffer.from(value ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const delayOf = (row: OutboxRow) => row.scheduledAt.getTime() - row.updatedAt.getTime();

// ---------------------------------------------------------------------------------------------------------------

describe('createOutboxPoller against PostgreSQL and a loopback receiver', () => {
  it('delivers rows with the row headers, the idempotency header and a valid signature, and marks them sent', async () => {
    // Prepare
    const ids = await insert(
      { payload: { n: 1 }, headers: { 'X-Correlation-Id': 'c-1' } },
      { payload: { n: 2 }, key: 'k' },
      { payload: { n: 3 }, topic: 'orders.paid.eu' },
    );
    const poller = aPoller({
      destinations: destinationsFor({ signing: { scheme: 'standard-webhooks', secrets: [SECRET] } }),
    });
    // Act
    const report = await poller.drain(soon());
    // Assess
    expect(report).toMatchObject({ claimed: 3, sent: 3, retried: 0, dead: 0, stale: 0, stoppedFor: 'empty' });
    const rows = await Promise.all(ids.map(rowOf));
    expect(rows.map((r) => [r.state, r.destination, r.attempt])).toEqual([
      ['Sent', 'hooks', 0],
      ['Sent', 'hooks', 0],
      ['Sent', 'hooks', 0],
    ]);
    expect(rows.every((r) => r.sentAt !== null)).toBe(true);
    const byKey = new Map(receiver.requests.map((r) => [r.headers['idempotency-key'], r]));
    expect([...byKey.keys()].sort()).toEqual([...ids].sort());
    const first = byKey.get(ids[0] as string);
    expect(JSON.parse(first?.body ?? '')).toEqual({ n: 1 });
    expect(first?.headers['x-correlation-id']).toBe('c-1');
    expect(first?.headers['webhook-id']).toBe(ids[0]);
    for (const request of receiver.requests) expect(signatureValid(request.headers, request.body)).toBe(true);
  });

  it('retries with growing delays, then goes dead with the last error when attempts run out', async () => {
    // Prepare
    receiver.handle((_request, response) => {
      response.writeHead(503).end('down for maintenance');
    });
    const [id] = (await insert({ maxAttempts: 4 })) as [RowId];
    const poller = aPoller();
    const delays: number[] = [];
    // Act
    for (let attempt = 1; attempt <= 3; attempt++) {
      const report = await poller.drain(soon());
      expect(report).toMatchObject({ claimed: 1, retried: 1, dead: 0 });
      const row = await rowOf(id);
      expect(row).toMatchObject({
        state: 'Pending',
        attempt,
        lastError: 'HTTP 503 Service Unavailable: down for maintenance',
      });
      delays.push(delayOf(row));
      await untilDue([id]);
    }
    const last = await poller.drain(soon());
    // Assess
    expect(last).toMatchObject({ claimed: 1, retried: 0, dead: 1 });
    expect(await rowOf(id)).toMatchObject({
      state: 'Dead',
      attempt: 4,
      lastError: 'HTTP 503 Service Unavailable: down for maintenance',
    });
    // baseMs 100 doubling: 100, 200, 400 (the database stamps both times; allow its rounding).
    expect(delays).toHaveLength(3);
    [100, 200, 400].forEach((expected, i) => {
      expect(delays[i]).toBeGreaterThanOrEqual(expected - 5);
      expect(delays[i]).toBeLessThanOrEqual(expected + 50);
    });
    expect(receiver.requests).toHaveLength(4);
  });

  it('dead-letters a 4xx at once, counting the attempt, and retries a timeout and a refused connection', async () => {
    // Prepare
    receiver.handle((request, response) => {
      if (request.body.includes('slow')) return; // never answers: the request times out
      response.writeHead(422).end('{"error":"unknown customer"}');
    });
    const destinations: Record<string, DestinationOptions> = {
      hooks: { type: 'http', url: receiver.url, timeoutMs: 300 },
      gone: { type: 'http', url: `http://127.0.0.1:${await closedPort()}/unreachable` },
    };
    const routes: RouteOptions[] = [
      { match: 'gone.#', destination: 'gone' },
      { match: '#', destination: 'hooks' },
    ];
    const [rejected, slow, refused] = (await insert(
      { payload: 'bad' },
      { payload: 'slow' },
      { topic: 'gone.away' },
    )) as [RowId, RowId, RowId];
    // Act
    const report = await aPoller({ destinations, routes }).drain(soon());
    // Assess
    expect(report).toMatchObject({ claimed: 3, sent: 0, retried: 2, dead: 1 });
    expect(await rowOf(rejected)).toMatchObject({
      state: 'Dead',
      attempt: 1,
      lastError: 'HTTP 422 Unprocessable Entity: {"error":"unknown customer"}',
    });
    expect(await rowOf(slow)).toMatchObject({
      state: 'Pending',
      attempt: 1,
      lastError: 'timeout after 300 ms',
    });
    const refusedRow = await rowOf(refused);
    expect(refusedRow).toMatchObject({ state: 'Pending', attempt: 1, destination: 'gone' });
    expect(refusedRow.lastError).toMatch(/^network error: .*ECONNREFUSED/);
  });

  it('honours Retry-After within the cap', async () => {
    // Prepare
    receiver.handle((request, response) => {
      const seconds = JSON.parse(request.body).retryAfter as number;
      response.writeHead(429, { 'retry-after': String(seconds) }).end();
    });
    const [short, long] = (await insert(
      { payload: { retryAfter: 3 } },
      { payload: { retryAfter: 3600 } },
    )) as [RowId, RowId];
    const poller = aPoller({ destinations: destinationsFor({ backoff: { maxMs: 60_000 } }) });
    // Act
    await poller.drain(soon());
    // Assess: 3 s as asked (more than the 100 ms backoff); one hour capped at the destination's maxMs.
    const shortDelay = delayOf(await rowOf(short));
    const longDelay = delayOf(await rowOf(long));
    expect(shortDelay).toBeGreaterThanOrEqual(2995);
    expect(shortDelay).toBeLessThanOrEqual(3050);
    expect(longDelay).toBeGreaterThanOrEqual(59_995);
    expect(longDelay).toBeLessThanOrEqual(60_050);
  });

  it('keeps the order of a key while its head row retries, and delivers other keys meanwhile', async () => {
    // Prepare: the head of key k fails once.
    let headFailures = 0;
    const [head, second, third, other] = (await insert(
      { key: 'k', payload: 'k1' },
      { key: 'k', payload: 'k2' },
      { key: 'k', payload: 'k3' },
      { key: 'j', payload: 'j1' },
    )) as [RowId, RowId, RowId, RowId];
    receiver.handle((request, response) => {
      if (request.headers['idempotency-key'] === head && headFailures++ === 0) response.writeHead(500).end();
      else response.writeHead(200).end();
    });
    // A retry delay well above a claim round trip on a loaded machine, so the first drain cannot reach it.
    const poller = aPoller({ options: { ...defaultOptions, backoff: { baseMs: 1_000, maxMs: 10_000 } } });
    // Act
    const first = await poller.drain(soon());
    const afterFirst = await Promise.all([head, second, third, other].map(rowOf));
    await untilDue([head]);
    const next = await poller.drain(soon());
    // Assess
    expect(first).toMatchObject({ retried: 1, sent: 1 });
    expect(afterFirst.map((r) => r.state)).toEqual(['Pending', 'Pending', 'Pending', 'Sent']);
    expect(afterFirst.slice(1, 3).map((r) => r.attempt)).toEqual([0, 0]);
    expect(next).toMatchObject({ sent: 3, retried: 0 });
    const keyK = receiver.requests.filter((r) => r.body.startsWith('"k')).map((r) => JSON.parse(r.body));
    expect(keyK).toEqual(['k1', 'k1', 'k2', 'k3']);
  });

  it('keeps per-key order over many keys and failures, and delivers every row', async () => {
    // Prepare: 6 keys × 5 rows, and every third row fails its first try.
    const messages = Array.from({ length: 30 }, (_, i) => ({ key: `key-${i % 6}`, payload: { i } }));
    const ids = await insert(...messages);
    const failedOnce = new Set<string>();
    receiver.handle((request, response) => {
      const id = request.headers['idempotency-key'] ?? '';
      if (BigInt(id) % 3n === 0n && !failedOnce.has(id)) {
        failedOnce.add(id);
        response.writeHead(503).end();
      } else response.writeHead(204).end();
    });
    const poller = aPoller({ options: { ...defaultOptions, backoff: { baseMs: 20, maxMs: 20 } } });
    // Act
    for (let round = 0; round < 20; round++) {
      await poller.drain(soon());
      const rows = await Promise.all(ids.map(rowOf));
      if (rows.every((r) => r.state === 'Sent')) break;
      await untilDue(rows.filter((r) => r.state === 'Pending').map((r) => r.id));
    }
    // Assess
    const rows = await Promise.all(ids.map(rowOf));
    expect(rows.every((r) => r.state === 'Sent')).toBe(true);
    for (let k = 0; k < 6; k++) {
      const expected = ids.filter((_, i) => i % 6 === k);
      const attempts = receiver.requests
        .map((r) => r.headers['idempotency-key'] as string)
        .filter((id) => expected.includes(id));
      // Every try of a key, failed ones included, happens in insert order.
      expect(attempts).toEqual([...attempts].sort((a, b) => Number(BigInt(a) - BigInt(b))));
      expect([...new Set(attempts)]).toEqual(expected);
    }
  });

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
    expect(await rowOf(id)).toMatchObject({
      state: 'Dead',
      attempt: 2,
      lastError: 'HTTP 500 Internal Server Error (destination "hooks" allows 2 attempts)',
    });
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
    expect(receiver.requests.map((r) => r.headers['idempotency-key'])).toEqual(ids);
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

describe('startOutboxLoop', () => {
  it('drains on wake-up, and on abort finishes the delivery in flight before returning', async () => {
    // Prepare
    const poller = aPoller();
    const controller = new AbortController();
    let answer: (() => void) | undefined;
    receiver.handle((_request, response) => {
      answer = () => response.writeHead(200).end();
    });
    // A long interval: only wake() can start the drain that finds the row soon.
    const loop = startOutboxLoop(poller, { pollIntervalMs: 60_000, signal: controller.signal });
    await sleep(50);
    const [id] = (await insert({})) as [RowId];
    // Act
    loop.wake();
    while (answer === undefined) await sleep(10);
    controller.abort();
    answer();
    await loop.done;
    // Assess
    expect(await rowOf(id)).toMatchObject({ state: 'Sent' });
    expect(receiver.requests).toHaveLength(1);
  });

  it('keeps running after a failed drain', async () => {
    // Prepare: a store whose first reclaim fails.
    let calls = 0;
    const real = store.outbox;
    const flaky: OutboxStore = {
      insert: (messages) => real.insert(messages),
      claim: (options) => real.claim(options),
      markSent: (items) => real.markSent(items),
      retry: (items) => real.retry(items),
      markDead: (items) => real.markDead(items),
      release: (items) => real.release(items),
      get: (id) => real.get(id),
      reclaimExpired: async (limit) => {
        calls++;
        if (calls === 1) throw new Error('connection reset');
        return real.reclaimExpired(limit);
      },
    };
    const reports: string[] = [];
    const controller = new AbortController();
    const [id] = (await insert({})) as [RowId];
    // Act
    const loop = startOutboxLoop(aPoller({ store: flaky }), {
      pollIntervalMs: 10,
      signal: controller.signal,
      onDrain: (report) => {
        reports.push(report.stoppedFor);
        if (report.sent > 0) controller.abort();
      },
    });
    await loop.done;
    // Assess
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(reports.at(-1)).toBe('empty');
    expect(await rowOf(id)).toMatchObject({ state: 'Sent' });
  });
});
