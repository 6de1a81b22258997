import type { RowId } from '@queuebox/core';
import { messageIdsOf } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import type { DestinationOptions, RouteOptions } from '../src/options.ts';
import { closedPort } from './support/http-receiver.ts';
import {
  aPoller,
  defaultOptions,
  delayOf,
  destinationsFor,
  insert,
  receiver,
  rowIdOf,
  rowOf,
  SECRET,
  signatureValid,
  soon,
  store,
  untilDue,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

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
    // The idempotency key is the message id: the schema's install id, the row id, the row's uid.
    const messageIds = await messageIdsOf(store, ids);
    const byKey = new Map(receiver.requests.map((r) => [r.headers['idempotency-key'], r]));
    expect([...byKey.keys()].sort()).toEqual([...messageIds].sort());
    const first = byKey.get(messageIds[0] as string);
    expect(JSON.parse(first?.body ?? '')).toEqual({ n: 1 });
    expect(first?.headers['x-correlation-id']).toBe('c-1');
    expect(first?.headers['webhook-id']).toBe(messageIds[0]);
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

  it('retries a 4xx like a timeout and a refused connection, and dead-letters it only at its last attempt', async () => {
    // Prepare: the specification's state table sends a row dead only when no attempt remains (or no route, or a
    // transform): a 422 is a failure like any other.
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
    const [rejected, slow, refused, lastTry] = (await insert(
      { payload: 'bad' },
      { payload: 'slow' },
      { topic: 'gone.away' },
      { payload: 'bad', maxAttempts: 1 },
    )) as [RowId, RowId, RowId, RowId];
    // Act
    const report = await aPoller({ destinations, routes }).drain(soon());
    // Assess
    expect(report).toMatchObject({ claimed: 4, sent: 0, retried: 3, dead: 1 });
    expect(await rowOf(rejected)).toMatchObject({
      state: 'Pending',
      attempt: 1,
      lastError: 'HTTP 422 Unprocessable Entity: {"error":"unknown customer"}',
    });
    expect(await rowOf(lastTry)).toMatchObject({
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
    // Each row through its own poller (publishers): the first answer pauses the destination in its publisher.
    const destinations = destinationsFor({ backoff: { maxMs: 60_000 } });
    const [short] = (await insert({ payload: { retryAfter: 3 } })) as [RowId];
    await aPoller({ destinations }).drain(soon());
    const [long] = (await insert({ payload: { retryAfter: 3600 } })) as [RowId];
    // Act
    await aPoller({ destinations }).drain(soon());
    // Assess: 3 s as asked (more than the 100 ms backoff); one hour capped at the destination's maxMs.
    const shortDelay = delayOf(await rowOf(short));
    const longDelay = delayOf(await rowOf(long));
    expect(shortDelay).toBeGreaterThanOrEqual(2995);
    expect(shortDelay).toBeLessThanOrEqual(3050);
    expect(longDelay).toBeGreaterThanOrEqual(59_995);
    expect(longDelay).toBeLessThanOrEqual(60_050);
  });

  it('holds back the other rows of a destination that answered 429 with Retry-After, untried, and delivers the rest', async () => {
    // Prepare: "hooks" answers its first request 429 with Retry-After: 3600 and every later one 200; "other" (the
    // same receiver, another destination) always 200. One connection for "hooks", so its rows go one by one.
    let limited = 0;
    receiver.handle((request, response) => {
      const toHooks = request.url.startsWith('/hooks');
      if (toHooks && limited++ === 0) response.writeHead(429, { 'retry-after': '3600' }).end();
      else response.writeHead(200).end();
    });
    const origin = new URL(receiver.url).origin;
    const destinations: Record<string, DestinationOptions> = {
      hooks: { type: 'http', url: `${origin}/hooks`, maxConcurrency: 1, backoff: { maxMs: 60_000 } },
      other: { type: 'http', url: `${origin}/other` },
    };
    const routes: RouteOptions[] = [
      { match: 'orders.#', destination: 'hooks' },
      { match: 'other.#', destination: 'other' },
    ];
    const hooks = await insert(...Array.from({ length: 8 }, (_, n) => ({ payload: { n } })));
    const other = await insert(
      ...Array.from({ length: 4 }, (_, n) => ({ topic: 'other.thing', payload: { n } })),
    );
    const poller = aPoller({ destinations, routes, options: { ...defaultOptions, batchSize: 20 } });
    // Act
    const report = await poller.drain(soon());
    // Assess: one request reached "hooks" (its row retried, one attempt, a minute: Retry-After within maxMs); its
    // seven other rows were given back untried, due when the pause ends (capped at maxMs too); "other" delivered.
    expect(receiver.requests.filter((r) => r.url.startsWith('/hooks'))).toHaveLength(1);
    expect(report).toMatchObject({ sent: 4, retried: 1, released: 7, dead: 0 });
    const hookRows = await Promise.all(hooks.map(rowOf));
    const tried = hookRows.filter((r) => r.attempt === 1);
    const untried = hookRows.filter((r) => r.attempt === 0);
    expect(tried).toHaveLength(1);
    expect(tried[0]?.lastError).toBe('HTTP 429 Too Many Requests');
    expect(untried).toHaveLength(7);
    for (const row of hookRows) {
      expect(row.state).toBe('Pending');
      const delay = delayOf(row);
      expect(delay).toBeGreaterThan(59_000);
      expect(delay).toBeLessThanOrEqual(60_050);
    }
    expect((await Promise.all(other.map(rowOf))).map((r) => r.state)).toEqual([
      'Sent',
      'Sent',
      'Sent',
      'Sent',
    ]);
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
      if (rowIdOf(request) === head && headFailures++ === 0) response.writeHead(500).end();
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
      const id = rowIdOf(request);
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
      const attempts = receiver.requests.map(rowIdOf).filter((id) => expected.includes(id));
      // Every try of a key, failed ones included, happens in insert order.
      expect(attempts).toEqual([...attempts].sort((a, b) => Number(BigInt(a) - BigInt(b))));
      expect([...new Set(attempts)]).toEqual(expected);
    }
  });
});
