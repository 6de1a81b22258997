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

async function storeRow(source: string): Promise<string> {
  return (await db.store.inbox.store(aMessage(source))).id;
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
    await worker.complete(row);
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

  it('giveUp: processing → dead with the reason', async () => {
    const source = aSource();
    const id = await storeRow(source);
    const worker = await openWorker(source);
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    await worker.giveUp(row, 'unknown invoice');
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
    const lost = await first.complete(stale).catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(ClaimLostError);
    expect((lost as ClaimLostError).id).toBe(id);
    await expect(first.giveUp(stale, 'late')).rejects.toThrow(ClaimLostError);
    await second.complete(current);
    const stored = await db.store.inbox.get(id);
    expect([stored?.state, stored?.attempt]).toEqual([MessageState.Sent, 1]);
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
});
