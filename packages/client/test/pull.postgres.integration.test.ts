/**
 * The pull API as an application opens it from a URL, on a real PostgreSQL: the rows are stored through the
 * store, as an HTTP or broker source of a pull source would.
 */
import { randomUUID } from 'node:crypto';
import { ConfigError, MessageState, type NewInboxMessage } from '@queuebox/core';
import { testPostgresUrl, useTestStore } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { ClaimLostError } from '../src/index.ts';
import { openPullWorker, type PullClient } from '../src/pull.ts';

const POSTGRES_URL = testPostgresUrl();
const db = useTestStore('client_pull', { poolSize: 4, storePoolSize: 2 });
const workers: PullClient[] = [];
afterAll(async () => {
  for (const worker of workers) await worker.close();
});

// Each test pulls from a source of its own, so no test claims another's rows.
const aSource = () => `pull_${randomUUID().slice(0, 8)}`;
const aMessage = (source: string): NewInboxMessage => ({
  source,
  idempotencyKey: randomUUID(),
  eventType: 'invoice.paid',
  aggregateId: 'inv-1',
  correlationId: null,
  payload: { invoice: 1 },
  headers: { 'x-test': 'yes' },
  maxAttempts: 5,
});

async function openWorker(source: string): Promise<PullClient> {
  const worker = await openPullWorker({ url: POSTGRES_URL, schema: db.schema, source, poolSize: 2 });
  workers.push(worker);
  return worker;
}

async function storeRow(source: string, maxAttempts = 5): Promise<string> {
  return (await db.store.inbox.store({ ...aMessage(source), maxAttempts })).id;
}

async function expireLeases(): Promise<void> {
  await db.pool.query(
    `UPDATE "${db.schema}".inbox SET lease_until = now() - interval '1 second' WHERE state = 'processing'`,
  );
}

describe('openPullWorker on postgres://', () => {
  it('claims the stored row of its source and completes it', async () => {
    // Prepare
    const source = aSource();
    const id = await storeRow(source);
    await storeRow(aSource());
    const worker = await openWorker(source);
    // Act
    const rows = await worker.claim(10, 60_000);
    // Assess
    expect(rows.map((r) => [r.id, r.source, r.state, r.payload, r.headers])).toEqual([
      [id, source, MessageState.Processing, { invoice: 1 }, { 'x-test': 'yes' }],
    ]);
    expect(worker.source).toBe(source);
    const [row] = rows;
    if (!row) throw new Error('expected a row');
    await worker.markProcessed(row);
    expect((await db.store.inbox.get(id))?.state).toBe(MessageState.Sent);
    expect(await worker.claim(10, 60_000)).toEqual([]);
  });

  it('retry: back to pending after the delay, counting an attempt and keeping the error', async () => {
    const source = aSource();
    const id = await storeRow(source);
    const worker = await openWorker(source);
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    await worker.retry(row, 3_600_000, 'downstream busy');
    const stored = await db.store.inbox.get(id);
    expect([stored?.state, stored?.attempt, stored?.lastError, stored?.claimToken]).toEqual([
      MessageState.Pending,
      1,
      'downstream busy',
      null,
    ]);
    // Not due for an hour: nothing to claim now.
    expect(await worker.claim(1, 60_000)).toEqual([]);
  });

  it('markDead: processing → dead with the reason', async () => {
    const source = aSource();
    const id = await storeRow(source);
    const worker = await openWorker(source);
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    await worker.markDead(row, 'unknown invoice');
    const stored = await db.store.inbox.get(id);
    expect([stored?.state, stored?.lastError]).toEqual([MessageState.Dead, 'unknown invoice']);
  });

  it('a stale claim is fenced: its settle throws ClaimLostError and the new owner settles the row', async () => {
    // Prepare: worker 1 claims, its lease expires, worker 2 takes the row over.
    const source = aSource();
    const id = await storeRow(source);
    const first = await openWorker(source);
    const second = await openWorker(source);
    const [stale] = await first.claim(1, 60_000);
    if (!stale) throw new Error('expected a row');
    await expireLeases();
    const [current] = await second.claim(1, 60_000);
    if (!current) throw new Error('expected the takeover');
    expect(current.id).toBe(id);
    expect(current.claimToken).not.toBe(stale.claimToken);
    // Act / Assess
    const lost = await first.markProcessed(stale).catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(ClaimLostError);
    expect((lost as ClaimLostError).id).toBe(id);
    await expect(first.markDead(stale, 'late')).rejects.toThrow(ClaimLostError);
    await second.markProcessed(current);
    const stored = await db.store.inbox.get(id);
    expect([stored?.state, stored?.attempt]).toEqual([MessageState.Sent, 1]);
  });

  it('honours max_attempts (sources.<name>.maxAttempts): the README loop retries a failing row into dead', async () => {
    // The audit's repro: max_attempts 2, five rounds of claim + retry left the row pending at attempt 5.
    const source = aSource();
    const id = await storeRow(source, 2);
    const worker = await openWorker(source);
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const [row] = await worker.claim(1, 60_000);
      if (row) outcomes.push(await worker.retry(row, 0, 'handler failed'));
    }
    const stored = await db.store.inbox.get(id);
    expect(outcomes).toEqual(['pending', 'dead']);
    expect([stored?.state, stored?.lastError]).toEqual([MessageState.Dead, 'handler failed']);
  });

  it('gives up a row whose claims keep expiring (a worker crashing on it) once its attempts are used up', async () => {
    // The audit's second repro: claimed five times and never settled, the row stayed processing at attempt 5.
    const source = aSource();
    const id = await storeRow(source, 2);
    const worker = await openWorker(source);
    const attempts: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      for (const row of await worker.claim(1, 60_000)) attempts.push(row.attempt);
      await expireLeases();
    }
    const stored = await db.store.inbox.get(id);
    expect(attempts).toEqual([0, 1]);
    expect(stored?.state).toBe(MessageState.Dead);
    expect(stored?.attempt).toBe(2);
    expect(stored?.lastError).toMatch(/^no attempt remains \(attempt 2, max_attempts 2\)/);
  });

  it('refuses claim and retry arguments the database cannot take, before any statement', async () => {
    const source = aSource();
    await storeRow(source);
    const worker = await openWorker(source);
    for (const call of [
      () => worker.claim(1, Number.POSITIVE_INFINITY),
      () => worker.claim(3e9, 1000),
      () => worker.claim(1.5, 1000),
    ]) {
      await expect(call()).rejects.toThrow(RangeError);
    }
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    for (const delayMs of [Number.POSITIVE_INFINITY, 1e20, -1, Number.NaN]) {
      await expect(worker.retry(row, delayMs, 'x')).rejects.toThrow(/delayMs/);
    }
    await worker.markProcessed(row);
  });

  it('close() ends the pool once; a second close is harmless', async () => {
    const worker = await openPullWorker({ url: POSTGRES_URL, schema: db.schema, source: aSource() });
    await worker.close();
    await worker.close();
    await expect(worker.claim(1, 1000)).rejects.toThrow();
  });
});

describe('openPullWorker options', () => {
  it('refuses an unknown URL scheme, a bad schema name and a bad source before connecting', async () => {
    await expect(openPullWorker({ url: 'mysql://db/app', source: 's' })).rejects.toThrow(ConfigError);
    await expect(openPullWorker({ url: 'localhost:5432', source: 's' })).rejects.toThrow(/has no scheme/);
    await expect(openPullWorker({ url: POSTGRES_URL, source: 's', schema: 'a b' })).rejects.toThrow(
      ConfigError,
    );
    await expect(openPullWorker({ url: POSTGRES_URL, source: '' })).rejects.toThrow(/source/);
    await expect(openPullWorker({ url: POSTGRES_URL, source: 'x'.repeat(201) })).rejects.toThrow(/source/);
  });

  it.each([
    ['poolSize', { poolSize: 0 }],
    ['poolSize', { poolSize: -1 }],
    ['poolSize', { poolSize: Number.NaN }],
    ['poolSize', { poolSize: 1.5 }],
    ['poolSize', { poolSize: 1001 }],
    ['connectTimeoutMs', { connectTimeoutMs: -1 }],
    ['connectTimeoutMs', { connectTimeoutMs: Number.POSITIVE_INFINITY }],
    ['queryTimeoutMs', { queryTimeoutMs: Number.NaN }],
    ['queryTimeoutMs', { queryTimeoutMs: 3e9 }],
  ])('refuses %s %j at open, not at the first claim', async (path, option) => {
    const error = await openPullWorker({ url: POSTGRES_URL, source: 'invoices', ...option }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.path)).toEqual([path]);
  });

  it.each(['invoices pull', 'a/b', '-invoices', 'invoices\n', 'Rechnungen-ä'])(
    'refuses the source %j: not a configurable source name',
    async (source) => {
      await expect(openPullWorker({ url: POSTGRES_URL, source })).rejects.toThrow(ConfigError);
    },
  );

  it('accepts every name the configuration accepts', async () => {
    for (const source of ['invoices', 'orders-in', 'Stripe_2', 'x'.repeat(200), '0']) {
      const worker = await openPullWorker({ url: POSTGRES_URL, source });
      await worker.close();
    }
  });
});
