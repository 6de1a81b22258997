/**
 * The pull worker's attempts on a real PostgreSQL: a retry with no attempt left sends the row dead, a claim takes
 * over expired rows one at a time (so a row that crashes its worker crashes it alone), a taken-over row whose
 * attempts are used up is given up before any handler sees it, and bad arguments are refused before any statement.
 */
import { randomUUID } from 'node:crypto';
import type { InboxStore, NewInboxMessage } from '@queuebox/core';
import { MessageState, StoreError } from '@queuebox/core';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { type ClaimedInboxRow, createPullWorker, MAX_CLAIM_ROWS } from '../src/index.ts';

const db = useTestStore('inbox_pull_attempts', { storePoolSize: 4 });

const aSourceName = () => `pull_${randomUUID().slice(0, 8)}`;
const aMessage = (source: string, maxAttempts: number, payload: NewInboxMessage['payload']) => ({
  source,
  idempotencyKey: randomUUID(),
  eventType: 'invoice.paid',
  aggregateId: null,
  correlationId: null,
  payload,
  headers: {},
  maxAttempts,
});

async function storeRows(source: string, maxAttempts: number, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1)
    ids.push((await db.store.inbox.store(aMessage(source, maxAttempts, { i }))).id);
  return ids;
}

async function stateOf(id: string) {
  const row = await db.store.inbox.get(id);
  return [row?.state, row?.attempt, row?.lastError];
}

describe('pull worker retry', () => {
  it('answers pending while attempts remain, and sends the row dead with the error when none remains', async () => {
    // Prepare: max_attempts 2 — the first failure leaves one attempt, the second leaves none.
    const source = aSourceName();
    const [id = ''] = await storeRows(source, 2, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    // Act
    const [first] = await worker.claim(1, 60_000);
    if (!first) throw new Error('expected a row');
    const firstOutcome = await worker.retry(first, 0, 'downstream busy');
    const afterFirst = await stateOf(id);
    const [second] = await worker.claim(1, 60_000);
    if (!second) throw new Error('expected the row again');
    const secondOutcome = await worker.retry(second, 0, 'downstream still busy');
    // Assess
    expect(firstOutcome).toBe('pending');
    expect(afterFirst).toEqual([MessageState.Pending, 1, 'downstream busy']);
    expect(second.attempt).toBe(1);
    expect(secondOutcome).toBe('dead');
    // Two tries made, two counted: the retry that gives up counts its try as every other retry does.
    expect(await stateOf(id)).toEqual([MessageState.Dead, 2, 'downstream still busy']);
    expect(await worker.claim(1, 60_000)).toEqual([]);
  });

  it('never leaves a row pending past its max_attempts, however often the application retries', async () => {
    // The audit's repro: max_attempts 2 and five rounds of claim + retry left the row pending at attempt 5.
    const source = aSourceName();
    const [id = ''] = await storeRows(source, 2, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    for (let i = 0; i < 5; i += 1) {
      const [row] = await worker.claim(1, 60_000);
      if (row) await worker.retry(row, 0, 'handler failed');
    }
    const row = await db.store.inbox.get(id);
    expect(row?.state).toBe(MessageState.Dead);
    expect(row?.attempt).toBe(2);
  });

  it('reads the attempts from the database when handed only { id, claimToken }', async () => {
    const source = aSourceName();
    const [id = ''] = await storeRows(source, 1, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    expect(await worker.retry({ id: row.id, claimToken: row.claimToken }, 0, 'no luck')).toBe('dead');
    expect(await stateOf(id)).toEqual([MessageState.Dead, 1, 'no luck']);
  });

  it('takes { id, claimToken } with the token in upper case, as every other settle does', async () => {
    // A UUID often comes back upper-cased from another system; the settles' SQL compares tokens without case.
    const source = aSourceName();
    const [id = ''] = await storeRows(source, 3, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    const [row] = await worker.claim(1, 60_000);
    if (!row) throw new Error('expected a row');
    const upper = { id: row.id, claimToken: row.claimToken.toUpperCase() };
    expect(await worker.retry(upper, 0, 'later')).toBe('pending');
    expect(await stateOf(id)).toEqual([MessageState.Pending, 1, 'later']);
    // A token that is not the row's is still refused.
    const [again] = await worker.claim(1, 60_000);
    if (!again) throw new Error('expected the row again');
    const other = await worker.retry({ id: again.id, claimToken: randomUUID() }, 0, 'x').catch((e) => e);
    expect((other as Error).name).toBe('ClaimLostError');
  });
});

describe('pull worker takeover of expired claims', () => {
  it('takes over one expired row per claim, never mixed with other rows', async () => {
    // Prepare: a worker claimed three rows and died; two more rows arrived since.
    const source = aSourceName();
    const crashed = await storeRows(source, 5, 3);
    const worker = createPullWorker({ store: db.store.inbox, source });
    expect(await worker.claim(3, 60_000)).toHaveLength(3);
    const fresh = await storeRows(source, 5, 2);
    await db.expireInboxLeases();
    // Act: each claim asks for ten rows.
    const claims: ClaimedInboxRow[][] = [];
    for (let i = 0; i < 4; i += 1) {
      const rows = await worker.claim(10, 60_000);
      claims.push(rows);
      for (const row of rows) await worker.markProcessed(row);
    }
    // Assess: the three taken-over rows alone, in id order, each with one more attempt; then the fresh rows.
    expect(claims.map((rows) => rows.map((r) => [r.id, r.attempt]))).toEqual([
      [[crashed[0], 1]],
      [[crashed[1], 1]],
      [[crashed[2], 1]],
      fresh.map((id) => [id, 0]),
    ]);
  });

  it('isolates a row that crashes its worker: the healthy rows are done, the poison row goes dead alone', async () => {
    // Prepare: the README loop, whose handler "crashes" (stops the loop without settling, as SIGKILL or an OOM
    // would) on the poison row. max_attempts 3.
    const source = aSourceName();
    const [poison = ''] = await storeRows(source, 3, 1);
    const healthy = await storeRows(source, 3, 6);
    const seen: Record<string, number[]> = {};
    let crashes = 0;
    async function runWorkerUntilCrash(): Promise<void> {
      const worker = createPullWorker({ store: db.store.inbox, source });
      for (let round = 0; round < 5; round += 1) {
        for (const row of await worker.claim(5, 60_000)) {
          seen[row.id] = [...(seen[row.id] ?? []), row.attempt];
          if (row.id === poison) {
            crashes += 1;
            return; // the process died: nothing of this claim is settled
          }
          await worker.markProcessed(row);
        }
      }
    }
    // Act: a supervisor restarts the worker after each crash; the leases expire in between.
    for (let restart = 0; restart < 10; restart += 1) {
      await runWorkerUntilCrash();
      await db.expireInboxLeases();
    }
    // Assess
    const rows = await db.inboxRows(source);
    expect(rows.filter((r) => r.id !== poison).map((r) => r.state)).toEqual(
      healthy.map(() => MessageState.Sent),
    );
    const dead = rows.find((r) => r.id === poison);
    expect(dead?.state).toBe(MessageState.Dead);
    expect(dead?.lastError).toMatch(/no attempt remains/);
    expect(crashes).toBe(3);
    expect(seen[poison]).toEqual([0, 1, 2]);
    for (const row of rows) expect(row.attempt).toBeLessThanOrEqual(row.maxAttempts);
    for (const [id, attempts] of Object.entries(seen)) expect(Math.max(...attempts), id).toBeLessThan(3);
  });

  it('gives up a taken-over row whose attempts are used up, and hands the application the next row instead', async () => {
    // Prepare: max_attempts 1, claimed once and never settled; another row waits.
    const source = aSourceName();
    const [stuck = ''] = await storeRows(source, 1, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    await worker.claim(1, 60_000);
    const [next = ''] = await storeRows(source, 1, 1);
    await db.expireInboxLeases();
    // Act
    const rows = await worker.claim(10, 60_000);
    // Assess
    expect(rows.map((r) => [r.id, r.attempt])).toEqual([[next, 0]]);
    const given = await db.store.inbox.get(stuck);
    expect([given?.state, given?.attempt, given?.claimToken]).toEqual([MessageState.Dead, 1, null]);
    expect(given?.lastError).toMatch(/no attempt remains \(attempt 1, max_attempts 1\)/);
  });

  it('claims on past many spent rows of a crashed worker: due rows are answered, not []', async () => {
    // Prepare: a crashed worker left 12 rows at their last attempt; 5 fresh rows are due (the audit's repro: the
    // claim gave up 10, one per round, and answered [] — a worker reads that as idle and sleeps).
    const source = aSourceName();
    const spent = await storeRows(source, 1, 12);
    const worker = createPullWorker({ store: db.store.inbox, source });
    expect(await worker.claim(12, 60_000)).toHaveLength(12);
    const fresh = await storeRows(source, 1, 5);
    await db.expireInboxLeases();
    // Act
    const rows = await worker.claim(5, 60_000);
    // Assess
    expect(rows.map((r) => r.id)).toEqual(fresh);
    const states = await Promise.all(spent.map(async (id) => (await db.store.inbox.get(id))?.state));
    expect(states).toEqual(spent.map(() => MessageState.Dead));
  });
});

describe('pull worker arguments', () => {
  /** An inbox store every call of which fails the test: the worker must refuse before any statement. */
  const untouchable = new Proxy({} as InboxStore, {
    get: (_target, name) => () => {
      throw new Error(`the store was called (${String(name)})`);
    },
  });
  const row = { id: '1', claimToken: randomUUID(), attempt: 0, maxAttempts: 5 };

  it.each([
    ['n', 0, 1000],
    ['n', 1.5, 1000],
    ['n', 3e9, 1000],
    ['n', MAX_CLAIM_ROWS + 1, 1000],
    ['n', Number.NaN, 1000],
    ['leaseMs', 1, 0],
    ['leaseMs', 1, -1],
    ['leaseMs', 1, Number.POSITIVE_INFINITY],
    ['leaseMs', 1, Number.NaN],
    ['leaseMs', 1, 1e20],
  ])('claim refuses %s in claim(%s, %s) with a RangeError naming it', async (name, n, leaseMs) => {
    const worker = createPullWorker({ store: untouchable, source: 'invoices' });
    const error = await worker.claim(n, leaseMs).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toContain(name);
  });

  it.each([[Number.POSITIVE_INFINITY], [1e20], [-1], [Number.NaN]])(
    'retry refuses the delay %s with a RangeError naming delayMs',
    async (delayMs) => {
      const worker = createPullWorker({ store: untouchable, source: 'invoices' });
      const error = await worker.retry(row, delayMs, 'x').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RangeError);
      expect((error as Error).message).toContain('delayMs');
    },
  );

  it('refuses on the real store too, where these arguments used to come back as StoreError', async () => {
    const source = aSourceName();
    await storeRows(source, 5, 1);
    const worker = createPullWorker({ store: db.store.inbox, source });
    for (const call of [
      () => worker.claim(1, Number.POSITIVE_INFINITY),
      () => worker.claim(3e9, 1000),
      () => worker.claim(1, 1e20),
    ]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).not.toBeInstanceOf(StoreError);
      expect(error).toBeInstanceOf(RangeError);
    }
    const [claimed] = await worker.claim(1, 60_000);
    if (!claimed) throw new Error('expected a row');
    for (const delayMs of [Number.POSITIVE_INFINITY, 1e20]) {
      const error = await worker.retry(claimed, delayMs, 'x').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RangeError);
    }
    expect((await db.store.inbox.get(claimed.id))?.state).toBe(MessageState.Processing);
  });
});
