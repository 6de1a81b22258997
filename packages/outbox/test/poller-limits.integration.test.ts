/**
 * The poller with values at the ends of their ranges, as a program that builds it without the configuration's
 * validation may pass them (real PostgreSQL, a real HTTP receiver on 127.0.0.1):
 *
 * - a drain deadline further away than a timer can wait (2^31 − 1 ms, about 24.8 days; `Infinity` for "until the
 *   outbox is empty") must not cut the requests it starts: Node fires a longer `setTimeout` after 1 ms, which
 *   aborted every request at once, counted an attempt and retried the row, until it went dead unsent;
 * - a backoff without a usable ceiling (`maxMs: Infinity`) at a high attempt gives a delay PostgreSQL cannot add to
 *   a timestamp: the retry must still be written (the row due after the longest delay the store keeps), not fail the
 *   settle, which left every retried row of the batch processing until its lease expired.
 */
import { randomBytes } from 'node:crypto';
import type { NewOutboxMessage, RowId, Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { testPool, testPostgresUrl } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOutboxPoller, type OutboxPollerOptions } from '../src/poller.ts';
import { createPublishers, defaultPublisherFactories, type PublisherSet } from '../src/publishers.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

const schema = `t_poller_limits_${randomBytes(4).toString('hex')}`;
const pool = testPool(2);
let store: Store;
let receiver: HttpReceiver;
const publisherSets: PublisherSet[] = [];

beforeAll(async () => {
  receiver = await startHttpReceiver();
  store = await openPostgresStore({ url: testPostgresUrl(), schema });
  await store.migrate();
});
afterEach(async () => {
  await Promise.all(publisherSets.splice(0).map((p) => p.close()));
  receiver.reset();
  await pool.query(`DELETE FROM "${schema}".outbox`);
});
afterAll(async () => {
  await store.close();
  await receiver.close();
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

const message = (over: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  topic: 'orders.paid',
  key: null,
  payload: { cents: 100 },
  headers: {},
  maxAttempts: 3,
  ...over,
});

function aPoller(options: Partial<OutboxPollerOptions>) {
  const destinations = { hooks: { type: 'http' as const, url: receiver.url, timeoutMs: 5000 } };
  const publishers = createPublishers(destinations, defaultPublisherFactories);
  publisherSets.push(publishers);
  return createOutboxPoller({
    store: store.outbox,
    publishers,
    routes: [{ match: 'orders.#', destination: 'hooks' }],
    destinations,
    options: {
      batchSize: 10,
      claimTimeoutMs: 30_000,
      maxAttempts: 3,
      backoff: { baseMs: 100, maxMs: 10_000 },
      settleReserveMs: 200,
      ...options,
    },
    random: () => 1,
  });
}

async function rowsById(ids: readonly RowId[]) {
  const { rows } = await pool.query<{ id: string; state: string; attempt: number; due_in_days: number }>(
    `SELECT id::text AS id, state, attempt, (extract(epoch FROM scheduled_at - now()) / 86400)::float8 AS due_in_days
     FROM "${schema}".outbox WHERE id = ANY ($1::bigint[]) ORDER BY id`,
    [ids],
  );
  return rows;
}

describe('the poller at the ends of its ranges', () => {
  it('delivers under a deadline further away than a timer can wait (Infinity, 30 days)', async () => {
    // Prepare: the receiver answers after 50 ms; a lease shorter than the destination's timeout (a program's choice,
    // the configuration refuses it), so the drain's own deadline bounds the requests.
    receiver.handle(async (_request, response) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      response.writeHead(204).end();
    });
    const ids = await store.outbox.insert([message(), message({ key: 'order-1' })]);
    const poller = aPoller({ claimTimeoutMs: 4000 });

    // Act: a drain until the outbox is empty, then one 30 days long.
    const first = await poller.drain({ deadline: Number.POSITIVE_INFINITY });
    const [late] = await store.outbox.insert([message({ key: 'order-1' })]);
    const second = await poller.drain({ deadline: Date.now() + 30 * 24 * 3600 * 1000 });

    // Assess: each row sent at its first attempt; none cut, none retried.
    expect(first).toMatchObject({ sent: 2, retried: 0, dead: 0 });
    expect(second).toMatchObject({ sent: 1, retried: 0, dead: 0 });
    expect((await rowsById([...ids, late as RowId])).map((r) => [r.state, r.attempt])).toEqual([
      ['sent', 0],
      ['sent', 0],
      ['sent', 0],
    ]);
    expect(receiver.requests).toHaveLength(3);
    await poller.close();
  });

  it('writes the retry of a row whose backoff has no ceiling at attempt 60, and the other retries of its batch', async () => {
    // Prepare: the destination fails; two rows of other keys, one at attempt 60 of 100.
    receiver.handle((_request, response) => {
      response.writeHead(503).end('down');
    });
    const [old, fresh] = (await store.outbox.insert([
      message({ key: 'order-old', maxAttempts: 100 }),
      message({ key: 'order-new', maxAttempts: 100 }),
    ])) as [RowId, RowId];
    await pool.query(`UPDATE "${schema}".outbox SET attempt = 59 WHERE id = $1`, [old]);
    const poller = aPoller({ backoff: { baseMs: 1000, maxMs: Number.POSITIVE_INFINITY } });

    // Act
    const report = await poller.drain({ deadline: Date.now() + 20_000 });

    // Assess: both retried; the old one due in about the longest delay the store keeps (68 years), the other in 1 s.
    expect(report).toMatchObject({ claimed: 2, retried: 2, stale: 0 });
    const [oldRow, freshRow] = await rowsById([old, fresh]);
    expect(oldRow).toMatchObject({ state: 'pending', attempt: 60 });
    expect(oldRow?.due_in_days).toBeGreaterThan(365 * 60);
    expect(freshRow).toMatchObject({ state: 'pending', attempt: 1 });
    expect(freshRow?.due_in_days).toBeLessThan(1);
    await poller.close();
  });
});
