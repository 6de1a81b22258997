/**
 * The relay's read-back of rows after a failed forward (`settledAfterAll` in relay.ts) keeps to the drain's budget,
 * on a real PostgreSQL. A forward-and-claim commits and then fails; the forward alone that follows finds its rows
 * forwarded already and answers them stale, and the relay reads them back one by one to count them forwarded after
 * all. Those reads used to go on whatever the drain's deadline or signal said; now none starts once the deadline
 * passed or the signal aborted, and the rows not read stay stale. The store is the real one; only its answers are
 * cut, and every `get` is counted.
 */
import { randomUUID } from 'node:crypto';
import type { Clock, InboxStore, NewInboxMessage, RowId } from '@queuebox/core';
import { MessageState, StoreError } from '@queuebox/core';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createRelay, type Sources } from '../src/index.ts';

const db = useTestStore('inbox_relay_settled_budget', { storePoolSize: 4 });

/** A push source of its own per test, so the rows of one test never meet the claims of another. */
function aSource(): { name: string; sources: Sources } {
  const name = `push_${randomUUID().slice(0, 8)}`;
  return { name, sources: { [name]: { type: 'http', topic: '{{ eventType }}' } } };
}

async function storeNew(source: string): Promise<RowId> {
  const message: NewInboxMessage = {
    source,
    idempotencyKey: randomUUID(),
    eventType: 'order.created',
    aggregateId: null,
    payload: { n: 1 },
    maxAttempts: 5,
  };
  const result = await db.store.inbox.store(message);
  if (result.status !== 'stored') throw new Error('expected a new row');
  return result.id;
}

/** The inbox states of `ids`, in order. */
async function states(ids: readonly RowId[]): Promise<(string | undefined)[]> {
  return Promise.all(ids.map(async (id) => (await db.store.inbox.get(id))?.state));
}

/**
 * The real inbox store whose first forward-and-claim commits, runs `afterCommit` (the drain's budget ends there) and
 * then fails with an error that is not an outage (as SQL Server's claim after its forward can); `gets` counts the
 * reads of single rows.
 */
function lossyStore(afterCommit: () => void): { store: InboxStore; gets: () => number } {
  let gets = 0;
  let failed = false;
  const store: InboxStore = {
    ...db.store.inbox,
    forwardAndClaim: async (items, claim) => {
      const step = await db.store.inbox.forwardAndClaim(items, claim);
      if (failed) return step;
      failed = true;
      afterCommit();
      throw new StoreError('The statement was chosen as a deadlock victim too many times (test)');
    },
    get: (id) => {
      gets++;
      return db.store.inbox.get(id);
    },
  };
  return { store, gets: () => gets };
}

describe('relay drain: reading rows back after a failed forward', () => {
  it('reads no row back once the deadline has passed: they stay stale and the drain stops for time', async () => {
    // Prepare: three rows; a clock that stands still until the failed forward-and-claim moves it past the deadline.
    const { name, sources } = aSource();
    const ids = [await storeNew(name), await storeNew(name), await storeNew(name)];
    let now = 1_000_000;
    const clock: Clock = { now: () => now };
    const deadline = now + 20_000;
    const { store, gets } = lossyStore(() => {
      now = deadline + 1;
    });
    // Act
    const report = await createRelay({ store, sources, clock, sleep: async () => {} }).drain({ deadline });
    // Assess: the rows were forwarded by the call that failed, but the drain read none of them back after its deadline.
    expect(await states(ids)).toEqual([MessageState.Sent, MessageState.Sent, MessageState.Sent]);
    expect(gets()).toBe(0);
    expect(report).toMatchObject({ claimed: 3, forwarded: 0, stale: 3, stoppedFor: 'time' });
  });

  it('reads no row back once its signal aborted: they stay stale and the drain stops as aborted', async () => {
    // Prepare: three rows; the signal aborts while the forward-and-claim that will fail runs.
    const { name, sources } = aSource();
    const ids = [await storeNew(name), await storeNew(name), await storeNew(name)];
    const stop = new AbortController();
    const { store, gets } = lossyStore(() => stop.abort());
    // Act
    const report = await createRelay({ store, sources, sleep: async () => {}, chainMs: 60_000 }).drain({
      deadline: Date.now() + 20_000,
      signal: stop.signal,
    });
    // Assess
    expect(await states(ids)).toEqual([MessageState.Sent, MessageState.Sent, MessageState.Sent]);
    expect(gets()).toBe(0);
    expect(report).toMatchObject({ claimed: 3, forwarded: 0, stale: 3, stoppedFor: 'aborted' });
  });

  it('still reads the rows back within the budget and counts them forwarded', async () => {
    // Prepare: as above, with the budget left whole.
    const { name, sources } = aSource();
    const ids = [await storeNew(name), await storeNew(name), await storeNew(name)];
    const { store, gets } = lossyStore(() => {});
    // Act
    const report = await createRelay({ store, sources, sleep: async () => {}, chainMs: 60_000 }).drain({
      deadline: Date.now() + 20_000,
    });
    // Assess
    expect(await states(ids)).toEqual([MessageState.Sent, MessageState.Sent, MessageState.Sent]);
    expect(gets()).toBe(3);
    expect(report).toMatchObject({ claimed: 3, forwarded: 3, stale: 0 });
  });
});
