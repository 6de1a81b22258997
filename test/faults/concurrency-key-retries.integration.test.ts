/**
 * Per-key order across retries with backoff, with two pollers (two stores, as two processes would have) on one
 * schema and a destination that fails about a third of its requests: at no moment are two requests of one key
 * in flight; each key's rows are first accepted in id order; every row is accepted exactly once (no lease expires,
 * so nothing is delivered again after it was accepted); a row is tried again only after it failed.
 */
import { randomBytes } from 'node:crypto';
import { type RowId, rowIdOfMessageId, type Store } from '@queuebox/core';
import {
  createOutboxPoller,
  createPublishers,
  defaultPublisherFactories,
  type OutboxPoller,
} from '@queuebox/outbox';
import { openPostgresStore } from '@queuebox/store-postgres';
import { testPool, testPostgresUrl } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HttpReceiver, startHttpReceiver } from '../../packages/outbox/test/support/http-receiver.ts';

const schema = `t_key_retries_${randomBytes(4).toString('hex')}`;
const pool = testPool(2);
const KEYS = 12;
const PER_KEY = 12;
let stores: Store[] = [];
let receiver: HttpReceiver;

beforeAll(async () => {
  receiver = await startHttpReceiver();
  stores = [
    await openPostgresStore({ url: testPostgresUrl(), schema, poolSize: 3 }),
    await openPostgresStore({ url: testPostgresUrl(), schema, poolSize: 3 }),
  ];
  await stores[0]?.migrate();
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await receiver.close();
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe('per-key order across retries, two pollers', () => {
  it('never has two requests of a key in flight, and accepts each row once, in id order per key', async () => {
    // Prepare: a deterministic sequence of answers (1 in 3 fails with 503), each after a short pause.
    let seed = 7;
    const nextRandom = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const inFlight = new Map<string, number>();
    let mostInFlightOfAKey = 0;
    const accepted: { key: string; row: number }[] = [];
    const failedBefore = new Set<number>();
    const triedAgainWithoutFailure: number[] = [];
    const seen = new Set<number>();
    receiver.handle(async (request, response) => {
      const body = JSON.parse(request.body) as { key: string; n: number; row: number };
      const row = Number(rowIdOfMessageId(request.headers['idempotency-key'] ?? ''));
      if (seen.has(row) && !failedBefore.has(row)) triedAgainWithoutFailure.push(row);
      seen.add(row);
      const now = (inFlight.get(body.key) ?? 0) + 1;
      inFlight.set(body.key, now);
      mostInFlightOfAKey = Math.max(mostInFlightOfAKey, now);
      await new Promise((resolve) => setTimeout(resolve, 1 + Math.floor(nextRandom() * 5)));
      inFlight.set(body.key, (inFlight.get(body.key) ?? 1) - 1);
      if (nextRandom() < 1 / 3) {
        failedBefore.add(row);
        response.writeHead(503).end('try later');
        return;
      }
      accepted.push({ key: body.key, row });
      response.writeHead(204).end();
    });
    const ids: RowId[] = [];
    for (let n = 0; n < PER_KEY; n += 1) {
      const messages = Array.from({ length: KEYS }, (_, k) => ({
        topic: 'payments.captured',
        key: `acct-${k}`,
        payload: { key: `acct-${k}`, n },
        maxAttempts: 100,
      }));
      ids.push(...(await (stores[0] as Store).outbox.insert(messages)));
    }
    const destinations = { ledger: { type: 'http' as const, url: receiver.url, timeoutMs: 5000 } };
    const publishers = createPublishers(destinations, defaultPublisherFactories);
    const pollers: OutboxPoller[] = stores.map((store) =>
      createOutboxPoller({
        store: store.outbox,
        publishers,
        routes: [{ match: 'payments.#', destination: 'ledger' }],
        destinations,
        options: {
          batchSize: 5,
          claimTimeoutMs: 60_000,
          maxAttempts: 100,
          backoff: { baseMs: 5, maxMs: 40 },
          settleReserveMs: 200,
          fillMs: 0,
        },
      }),
    );

    // Act: both pollers drain until every row is sent (or 60 s pass).
    const until = Date.now() + 60_000;
    const pending = async () =>
      (
        await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema}".outbox WHERE state <> 'sent'`,
        )
      ).rows[0]?.n ?? -1;
    const run = async (poller: OutboxPoller) => {
      while (Date.now() < until) {
        await poller.drain({ deadline: Date.now() + 2000 });
        if ((await pending()) === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    await Promise.all(pollers.map(run));
    await Promise.all(pollers.map((p) => p.close()));
    await publishers.close();

    // Assess
    expect(await pending()).toBe(0);
    expect(mostInFlightOfAKey).toBe(1);
    expect(triedAgainWithoutFailure).toEqual([]);
    expect(accepted).toHaveLength(ids.length);
    expect(new Set(accepted.map((a) => a.row)).size).toBe(ids.length);
    for (let k = 0; k < KEYS; k += 1) {
      const rows = accepted.filter((a) => a.key === `acct-${k}`).map((a) => a.row);
      expect(rows).toEqual([...rows].sort((a, b) => a - b));
    }
    expect(failedBefore.size).toBeGreaterThan(10);
  });
});
