import { randomUUID } from 'node:crypto';
import type { NewInboxMessage } from '@queuebox/core';
import { MessageState } from '@queuebox/core';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { ClaimLostError, createPullWorker } from '../src/index.ts';

const db = useTestStore('inbox_pull', { storePoolSize: 10 });

// Each test pulls from its own source name, so no test claims another's rows.
const aSourceName = () => `pull_${randomUUID().slice(0, 8)}`;
const aMessage = (source: string, overrides: Partial<NewInboxMessage> = {}): NewInboxMessage => ({
  source,
  idempotencyKey: randomUUID(),
  eventType: 'order.created',
  aggregateId: null,
  correlationId: null,
  payload: { order: 1 },
  headers: {},
  maxAttempts: 5,
  ...overrides,
});

async function storeRows(source: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const result = await db.store.inbox.store(aMessage(source));
    ids.push(result.id);
  }
  return ids;
}

describe('pull worker', () => {
  it('claims up to n rows of its own source only, each with a claim token', async () => {
    // Prepare
    const source = aSourceName();
    const other = aSourceName();
    const ids = await storeRows(source, 3);
    await storeRows(other, 1);
    // Act
    const rows = await createPullWorker({ store: db.store.inbox, source }).claim(2, 60_000);
    // Assess
    expect(rows).toHaveLength(2);
    expect(rows.every((r) => r.source === source && r.state === MessageState.Processing)).toBe(true);
    expect(rows.every((r) => typeof r.claimToken === 'string' && r.claimToken.length > 0)).toBe(true);
    expect(rows.map((r) => r.id).every((id) => ids.includes(id))).toBe(true);
  });

  it('complete: processing → processed', async () => {
    const source = aSourceName();
    const [id] = await storeRows(source, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    await worker.complete(row);
    expect((await db.store.inbox.get(id ?? ''))?.state).toBe(MessageState.Sent);
  });

  it('retry: processing → pending later, counting an attempt and keeping the error', async () => {
    const source = aSourceName();
    const [id] = await storeRows(source, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    await worker.retry(row, 60_000, 'downstream busy');
    const after = await db.store.inbox.get(id ?? '');
    expect(after).toMatchObject({ state: MessageState.Pending, attempt: 1, lastError: 'downstream busy' });
    expect(after?.scheduledAt.getTime()).toBeGreaterThan(Date.now() + 30_000);
    expect(await worker.claim(1, 60_000)).toEqual([]);
  });

  it('giveUp: processing → dead with the reason', async () => {
    const source = aSourceName();
    const [id] = await storeRows(source, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    await worker.giveUp(row, 'unknown customer');
    expect(await db.store.inbox.get(id ?? '')).toMatchObject({
      state: MessageState.Dead,
      lastError: 'unknown customer',
    });
  });

  it('takes over an expired claim with a new token; the old claim is fenced off with ClaimLostError', async () => {
    // Prepare: worker A claims, its lease expires, worker B takes the row over.
    const source = aSourceName();
    const [id] = await storeRows(source, 1);
    const a = createPullWorker({ store: db.store.inbox, source });
    const b = createPullWorker({ store: db.store.inbox, source });
    const [stale] = await a.claim(1, 60_000);
    if (!stale) throw new Error('expected a row');
    await db.expireInboxLeases();
    const [fresh] = await b.claim(1, 60_000);
    if (!fresh) throw new Error('expected the takeover');
    // Assess
    expect(fresh.id).toBe(stale.id);
    expect(fresh.claimToken).not.toBe(stale.claimToken);
    expect(fresh.attempt).toBe(stale.attempt + 1);
    for (const settle of [
      () => a.complete(stale),
      () => a.retry(stale, 0, 'late'),
      () => a.giveUp(stale, 'late'),
    ]) {
      await expect(settle()).rejects.toBeInstanceOf(ClaimLostError);
    }
    await b.complete(fresh);
    expect((await db.store.inbox.get(id ?? ''))?.state).toBe(MessageState.Sent);
  });

  it('refuses a non-positive batch, lease or delay', async () => {
    const worker = createPullWorker({ store: db.store.inbox, source: aSourceName() });
    await expect(worker.claim(0, 1000)).rejects.toThrow(RangeError);
    await expect(worker.claim(1, 0)).rejects.toThrow(RangeError);
    await expect(worker.retry({ id: '1', claimToken: randomUUID() }, -1, 'x')).rejects.toThrow(RangeError);
  });
});
